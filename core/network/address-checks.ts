import net from 'node:net';
import { AirlockError } from '../../contracts/errors';

/**
 * Address and host-name checks for the egress proxy. The sandbox may reach allow-listed *names*
 * only; these functions refuse everything that could turn an allowed name into a path to the host,
 * the LAN or a cloud metadata service.
 */

/**
 * Ranges no sandbox may reach through the proxy: loopback, private, link-local, metadata, reserved.
 * Documentation and benchmarking ranges are NOT here: they are not the host or the LAN, and egress
 * gateways and fake-IP DNS resolvers hand them out for public names.
 */
const BLOCKED_V4: Array<[string, number, string]> = [
  ['0.0.0.0', 8, 'an unspecified ("this network") address'],
  ['10.0.0.0', 8, 'a private address'],
  ['100.64.0.0', 10, 'a shared (CGNAT) address'],
  ['127.0.0.0', 8, 'a loopback address'],
  ['169.254.0.0', 16, 'a link-local / cloud metadata address'],
  ['172.16.0.0', 12, 'a private address'],
  ['192.0.0.0', 24, 'a reserved (IETF) address'],
  ['192.88.99.0', 24, 'a 6to4 relay address'],
  ['192.168.0.0', 16, 'a private address'],
  ['224.0.0.0', 4, 'a multicast address'],
  ['240.0.0.0', 4, 'a reserved address'],
];

const BLOCKED_V6: Array<[string, number, string]> = [
  ['::', 128, 'an unspecified address'],
  ['::1', 128, 'a loopback address'],
  // IPv4-compatible (deprecated) and NAT64 / 6to4 / Teredo prefixes embed IPv4 addresses that could
  // point anywhere; a sandbox never needs them.
  ['::', 96, 'an IPv4-compatible address'],
  ['64:ff9b::', 96, 'a NAT64 address'],
  ['64:ff9b:1::', 48, 'a NAT64 address'],
  ['100::', 64, 'a discard-only address'],
  ['2001::', 32, 'a Teredo address'],
  ['2002::', 16, 'a 6to4 address'],
  ['fc00::', 7, 'a unique-local (private) address'],
  ['fe80::', 10, 'a link-local address'],
  ['fec0::', 10, 'a site-local address'],
  ['ff00::', 8, 'a multicast address'],
];

function buildBlockList(): Array<{ list: net.BlockList; label: string }> {
  const out: Array<{ list: net.BlockList; label: string }> = [];
  for (const [addr, prefix, label] of BLOCKED_V4) {
    const list = new net.BlockList();
    list.addSubnet(addr, prefix, 'ipv4');
    out.push({ list, label });
  }
  for (const [addr, prefix, label] of BLOCKED_V6) {
    const list = new net.BlockList();
    list.addSubnet(addr, prefix, 'ipv6');
    out.push({ list, label });
  }
  return out;
}

const BLOCKED = buildBlockList();
const LOOPBACK = new net.BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

function family(address: string): 'ipv4' | 'ipv6' | undefined {
  const f = net.isIP(address);
  return f === 4 ? 'ipv4' : f === 6 ? 'ipv6' : undefined;
}

/**
 * Why a resolved address must not be reached, or undefined when it is a public unicast address.
 * IPv4-mapped IPv6 addresses (`::ffff:10.0.0.1`) are judged by their IPv4 part (net.BlockList does).
 */
export function blockedAddressReason(address: string): string | undefined {
  const f = family(address);
  if (!f) return 'not an IP address';
  for (const { list, label } of BLOCKED) {
    if (list.check(address, f)) return label;
  }
  if (f === 'ipv6' && address.toLowerCase().startsWith('::ffff:')) {
    // Mapped form written in hex (`::ffff:7f00:1`): BlockList matches it too, but be explicit.
    const mapped = address.slice(7);
    if (net.isIPv4(mapped)) return blockedAddressReason(mapped);
  }
  return undefined;
}

const PRIVATE = new net.BlockList();
PRIVATE.addSubnet('10.0.0.0', 8, 'ipv4');
PRIVATE.addSubnet('172.16.0.0', 12, 'ipv4');
PRIVATE.addSubnet('192.168.0.0', 16, 'ipv4');
PRIVATE.addSubnet('100.64.0.0', 10, 'ipv4');
PRIVATE.addSubnet('fc00::', 7, 'ipv6');

/**
 * True for LAN-style addresses (RFC 1918, CGNAT, unique-local IPv6): what an internal host the user
 * named may resolve to. Loopback, link-local and metadata addresses are never private here.
 */
export function isPrivateAddress(address: string): boolean {
  const f = family(address);
  return f !== undefined && PRIVATE.check(address, f);
}

/** True for 127.0.0.0/8 and ::1 (including the IPv4-mapped forms). */
export function isLoopbackAddress(address: string): boolean {
  const f = family(address);
  return f !== undefined && LOOPBACK.check(address, f);
}

/**
 * True when `host` is an IP address in any spelling a resolver or URL parser would accept:
 * dotted quads, IPv6 (bracketed or not, with zone), and the inet_aton forms — decimal
 * (`2130706433`), hex (`0x7f000001`, `0x7f.1`), octal (`0177.0.0.1`) and short (`127.1`).
 * Like the WHATWG URL parser, a name whose last label is numeric is treated as an address.
 */
export function isIpLiteral(host: string): boolean {
  let h = host.trim();
  if (h.startsWith('[') || h.includes(':')) return true;
  if (h.endsWith('.')) h = h.slice(0, -1);
  if (net.isIP(h)) return true;
  const labels = h.split('.');
  const last = labels[labels.length - 1] ?? '';
  return /^(0x[0-9a-f]*|[0-9]+)$/i.test(last);
}

/** Special-use names (RFC 6761) that never name a registry: refused before any lookup. */
const RESERVED_SUFFIXES = ['localhost', 'invalid', 'local', 'internal', 'home.arpa', 'in-addr.arpa', 'ip6.arpa'];

/** Why a (normalized) host name is reserved, or undefined. */
export function reservedNameReason(host: string): string | undefined {
  for (const suffix of RESERVED_SUFFIXES) {
    if (host === suffix || host.endsWith(`.${suffix}`)) return `.${suffix} is a special-use name that never leaves this machine`;
  }
  return undefined;
}

const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/**
 * Lower-cases a DNS host name and drops one trailing dot; undefined when it is not a plain host name
 * (empty labels such as `a..b`, userinfo, ports, slashes, underscores, over-long names).
 */
export function normalizeHostName(raw: string): string | undefined {
  let h = raw.toLowerCase();
  if (h.endsWith('.')) h = h.slice(0, -1);
  if (h.length === 0 || h.length > 253) return undefined;
  const labels = h.split('.');
  for (const label of labels) {
    if (!LABEL.test(label)) return undefined;
  }
  return h;
}

/** An internal host must be named exactly: no wildcard, no address (the CLI and the run's input check with this). */
export function internalHostName(raw: string): string {
  const host = normalizeHostName(raw.trim());
  if (!host || raw.includes('*') || isIpLiteral(raw)) {
    throw new AirlockError('INVALID_INPUT', `"${raw}": an internal host must be one exact host name (no wildcard, no IP address)`);
  }
  return host;
}
