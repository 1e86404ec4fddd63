/**
 * `airlock secrets` and `airlock network check` against the real OS keychain (a service of this
 * test's own, so no real entry is touched).
 */
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { captureIo } from '../../../test/support/cli-io';
import { requirePrerequisite } from '../../../test/support/prerequisites';
import { networkCommand } from './network';
import { secretsCommand, secretStoreFor } from './secrets';

const keychain = await requirePrerequisite('keychain');
const homes: string[] = [];
const env = { ...process.env, AIRLOCK_KEYCHAIN_SERVICE: `airlock-test-secrets-${randomBytes(4).toString('hex')}` };
afterAll(async () => {
  for (const h of homes) await rm(h, { recursive: true, force: true });
});

async function run(cmd: typeof secretsCommand, args: string[], home: string, stdin = '') {
  const { io, out } = captureIo({ ...env, AIRLOCK_HOME: home });
  const withStdin = { ...io, stdin: Object.assign(Readable.from([Buffer.from(stdin)]), { isTTY: false }) };
  const code = await cmd.run(args, withStdin);
  return { code, out: out() };
}

describe.skipIf(!keychain.ok)('airlock secrets / network check', () => {
  it('set (value from stdin) / list / rm: the value in the keychain only, never printed or in a file', async () => {
    const home = await mkdtemp(path.join(os.tmpdir(), 'airlock-secrets-'));
    homes.push(home);
    const value = `ghp_${randomBytes(16).toString('hex')}`;
    const set = await run(secretsCommand, ['set', 'gh', '--preset', 'github'], home, `${value}\n`);
    expect(set.out).toContain('stored gh in the OS keychain, sent only to github.com, api.github.com, *.githubusercontent.com');
    const listed = await run(secretsCommand, ['list'], home);
    expect(listed.out).toMatch(/^gh {2}hosts github.com,api.github.com,\*.githubusercontent.com {2}as bearer,basic:x-access-token {2}env GH_TOKEN,GITHUB_TOKEN/);
    const file = await readFile(path.join(home, 'egress-secrets.json'), 'utf8');
    expect(file + set.out + listed.out).not.toContain(value);
    const [resolved] = await secretStoreFor({ home, keychainService: env.AIRLOCK_KEYCHAIN_SERVICE }).resolve(['gh']);
    expect(resolved!.value.reveal()).toBe(value);
    expect((await run(secretsCommand, ['rm', 'gh'], home)).out).toContain('removed gh');
    await expect(secretStoreFor({ home, keychainService: env.AIRLOCK_KEYCHAIN_SERVICE }).resolve(['gh'])).rejects.toMatchObject({ kind: 'NOT_FOUND' });
    await expect(run(secretsCommand, ['set', 'Bad Name', '--preset', 'github'], home, 'xxxxyyyy\n')).rejects.toThrow();
  });

  it('set --command stores the command, no value (an earlier one leaves the keychain); list shows it; the command runs only when a run needs it', async () => {
    const home = await mkdtemp(path.join(os.tmpdir(), 'airlock-secrets-cmd-'));
    homes.push(home);
    const store = secretStoreFor({ home, keychainService: env.AIRLOCK_KEYCHAIN_SERVICE });
    const counter = path.join(home, 'runs');
    await run(secretsCommand, ['set', 'api', '--host', 'api.example.test', '--form', 'bearer'], home, 'an-old-stored-value\n');
    const set = await run(secretsCommand, ['set', 'api', '--host', 'api.example.test', '--form', 'bearer', '--env', 'API_TOKEN', '--command', `sh -c 'echo x >> "$0"; echo tok-from-command' ${counter}`, '--ttl', '600'], home);
    expect(set.code).toBe(0);
    expect(set.out).toContain(`stored api: \`sh -c 'echo x >> "$0"; echo tok-from-command' ${counter}\` prints its value on this machine when a run first needs it (again after 600 s) and again after a 401`);
    // The old stored value is gone from the keychain; the file holds the command, never a value.
    await expect(store.resolve(['api'])).rejects.toMatchObject({ kind: 'CONFLICT' });
    const file = JSON.parse(await readFile(path.join(home, 'egress-secrets.json'), 'utf8')) as { secrets: Array<{ command?: unknown }> };
    expect(file.secrets[0]?.command).toEqual({ argv: ['sh', '-c', 'echo x >> "$0"; echo tok-from-command', counter], ttlSeconds: 600 });
    expect(JSON.stringify(file)).not.toContain('an-old-stored-value');
    const listed = await run(secretsCommand, ['list'], home);
    expect(listed.out).toContain(`api  command sh -c 'echo x >> "$0"; echo tok-from-command' ${counter} (ttl 600 s)  hosts api.example.test`);
    // Resolving for a run does not run the command; the gateway's first need does.
    const [brokered] = await store.forRun(['api'], { env: process.env });
    await expect(readFile(counter)).rejects.toThrow();
    const source = brokered!.value;
    expect('get' in source).toBe(true);
    if ('get' in source) expect((await source.get()).reveal()).toBe('tok-from-command');
    expect((await readFile(counter, 'utf8')).trim()).toBe('x');
    // Shell syntax outside a quoted sh -c is refused with what to do.
    await expect(run(secretsCommand, ['set', 'api', '--host', 'api.example.test', '--form', 'bearer', '--command', 'gh auth token | head -1'], home)).rejects.toThrow(/runs without a shell — write sh -c/);
    await expect(run(secretsCommand, ['set', 'api', '--preset', 'github', '--ttl', '5'], home, 'value-xyz\n')).rejects.toThrow(/--ttl goes with --command/);
  });

  it('network check says which rule decides, with the project policy tightening', async () => {
    const home = await mkdtemp(path.join(os.tmpdir(), 'airlock-check-'));
    homes.push(home);
    const project = path.join(home, 'proj');
    await mkdir(path.join(project, '.airlock'), { recursive: true });
    await writeFile(path.join(project, '.airlock', 'egress.json'), JSON.stringify({ rules: ['git.example.test git-fetch'] }));
    const check = (url: string, method: string, ...more: string[]) => run(networkCommand, ['check', url, '--method', method, '--project', project, '--allow', 'git.example.test', ...more, '--json'], home).then((r) => ({ code: r.code, ...JSON.parse(r.out) }));
    expect(await check('https://git.example.test/r.git/info/refs?service=git-upload-pack', 'GET')).toMatchObject({ code: 0, allowed: true, intercepted: true, decidedBy: 'project-rule' });
    expect(await check('https://git.example.test/r.git/git-receive-pack', 'POST', '--rule', 'git.example.test git-push=agent/')).toMatchObject({ code: 1, allowed: false, decidedBy: 'project-rule', rule: 'git.example.test git-fetch (project policy)' });
    expect(await check('https://other.example.test/', 'GET')).toMatchObject({ allowed: false, decidedBy: 'allowlist' });
    expect(await check('https://10.0.0.1/', 'GET')).toMatchObject({ allowed: false, decidedBy: 'address' });
    await rm(path.join(project, '.airlock'), { recursive: true });
    expect(await check('https://git.example.test/x', 'POST')).toMatchObject({ allowed: true, intercepted: false, decidedBy: 'tunnel' });
    expect(await check('https://git.example.test/x', 'POST', '--rule', 'git.example.test read-only')).toMatchObject({ allowed: false, decidedBy: 'rule', rule: 'git.example.test read-only' });
  });
});
