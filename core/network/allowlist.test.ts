import { describe, expect, it } from 'vitest';
import { AirlockError } from '../../contracts/errors';
import { blockedAddressReason, isIpLiteral, normalizeHostName } from './address-checks';
import { Allowlist, formatAllowEntry, parseAllowEntry } from './allowlist';

describe('parseAllowEntry', () => {
  it.each([
    ['Registry.Example.TEST', { host: 'registry.example.test' }],
    ['registry.example.test.', { host: 'registry.example.test' }],
    ['registry.example.test:8443', { host: 'registry.example.test', ports: [8443] }],
    ['registry.example.test:443, 80', { host: 'registry.example.test', ports: [80, 443] }],
    ['*.example.test', { host: '*.example.test' }],
    ['https://mirror.example.test/npm/', { host: 'mirror.example.test', ports: [443] }],
    ['http://mirror.example.test:8080/debian', { host: 'mirror.example.test', ports: [8080] }],
  ])('%s', (text, expected) => {
    expect(parseAllowEntry(text)).toEqual(expected);
  });

  it.each([
    ['', /empty/],
    ['10.0.0.1', /IP addresses/],
    ['[::1]:443', /host:port|IP addresses/],
    ['*', /wildcard may only/],
    ['*.test', /too broad/],
    ['a.*.example.test', /leading/],
    ['user@example.test', /valid host name|host:port/],
    ['https://user:pw@example.test/', /user name/],
    ['example.test:0', /not a port/],
    ['example.test:70000', /not a port/],
    ['exa mple.test', /valid host name/],
    ['a..b.test', /valid host name/],
  ])('refuses %j with a typed error', (text, message) => {
    let err: unknown;
    try {
      parseAllowEntry(text);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(AirlockError);
    expect((err as AirlockError).kind).toBe('INVALID_INPUT');
    expect((err as AirlockError).message).toMatch(message);
  });
});

describe('Allowlist', () => {
  it('uses 443 for CONNECT and 80 for plain HTTP when an entry names no port', () => {
    const list = new Allowlist(['pkg.example.test']);
    expect(list.match('pkg.example.test', 443, 'connect')).toBeDefined();
    expect(list.match('pkg.example.test', 80, 'http')).toBeDefined();
    expect(list.match('pkg.example.test', 80, 'connect')).toBeUndefined();
    expect(list.match('pkg.example.test', 22, 'connect')).toBeUndefined();
  });

  it('matches wildcards on subdomains only', () => {
    const list = new Allowlist(['*.example.test:443']);
    expect(list.match('a.example.test', 443, 'connect')).toBeDefined();
    expect(list.match('a.b.example.test', 443, 'connect')).toBeDefined();
    expect(list.match('example.test', 443, 'connect')).toBeUndefined();
    expect(list.match('badexample.test', 443, 'connect')).toBeUndefined();
    expect(list.match('example.test.evil.test', 443, 'connect')).toBeUndefined();
  });

  it('merges ports for the same host', () => {
    const list = new Allowlist(['a.example.test:8443', 'a.example.test:9443', 'a.example.test']);
    expect(list.entries().map(formatAllowEntry)).toEqual(['a.example.test:80,443,8443,9443']);
  });
});

describe('address checks', () => {
  it.each(['127.0.0.1', '127.1', '2130706433', '0x7f000001', '0x7F.0.0.1', '017700000001', '1.2.3.4', '[::1]', '::1', 'fe80::1', '1.2.3.4.'])(
    '%s is an IP literal',
    (h) => expect(isIpLiteral(h)).toBe(true),
  );
  it.each(['example.test', 'a1.example.test', 'x0x.example.test', '1a.example.test'])('%s is a name', (h) =>
    expect(isIpLiteral(h)).toBe(false),
  );

  it.each([
    '0.0.0.0', '10.1.2.3', '100.64.0.1', '127.0.0.1', '169.254.169.254', '172.16.0.1', '172.31.255.255', '192.168.0.1',
    '224.0.0.1', '255.255.255.255', '::', '::1', '::ffff:127.0.0.1', '::ffff:7f00:1', '::ffff:169.254.169.254', 'fc00::1',
    'fd00:ec2::254', 'fe80::1', 'ff02::1', '64:ff9b::a00:1', '2002:a00:1::',
  ])('%s is blocked', (a) => expect(blockedAddressReason(a)).toBeDefined());

  // Classification of strings only: nothing is sent to these documentation-adjacent public addresses.
  it.each(['8.8.8.8', '172.32.0.1', '100.128.0.1', '2606:4700::1111', '::ffff:8.8.8.8'])('%s is not blocked', (a) =>
    expect(blockedAddressReason(a)).toBeUndefined(),
  );

  it('normalizes host names and refuses tricks', () => {
    expect(normalizeHostName('Example.TEST.')).toBe('example.test');
    expect(normalizeHostName('a..b')).toBeUndefined();
    expect(normalizeHostName('a_b.test')).toBeUndefined();
    expect(normalizeHostName('user@a.test')).toBeUndefined();
    expect(normalizeHostName('-a.test')).toBeUndefined();
    expect(normalizeHostName(`${'a'.repeat(64)}.test`)).toBeUndefined();
  });
});
