import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CliIo } from '../../core/cli/command';
import { keysCommand } from '../../core/cli/commands/keys';
import { providersCommand } from '../../core/cli/commands/providers';
import { startFakeUpstream, type FakeUpstream } from '../fixtures/fake-upstream';
import { requirePrerequisite } from '../support/prerequisites';

const keychain = await requirePrerequisite('keychain');

function io(env: NodeJS.ProcessEnv, stdinText?: string): { io: CliIo; out: () => string; err: () => string } {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const stdin = new PassThrough();
  let o = '';
  let e = '';
  stdout.on('data', (c: Buffer) => (o += c));
  stderr.on('data', (c: Buffer) => (e += c));
  stdin.end(stdinText ?? '');
  return { io: { stdout, stderr, stdin, env }, out: () => o, err: () => e };
}

describe.skipIf(!keychain.ok)('airlock keys / providers CLI', () => {
  let home: string;
  let env: NodeJS.ProcessEnv;
  let up: FakeUpstream;
  const id = `zz-cli-${randomBytes(3).toString('hex')}`;
  const KEY = `sk-canary-cli-${randomBytes(16).toString('hex')}`;
  const seen: string[] = [];

  beforeAll(async () => {
    home = await mkdtemp(path.join(os.tmpdir(), 'airlock-cli-'));
    env = { ...process.env, AIRLOCK_HOME: home };
    up = await startFakeUpstream({ expectedKey: KEY });
  });
  afterAll(async () => {
    const c = io(env);
    await providersCommand.run(['rm', id], c.io).catch(() => undefined);
    await up.close();
    await rm(home, { recursive: true, force: true });
    for (const s of seen) expect(s).not.toContain(KEY);
  });

  it('adds a provider, stores its key from stdin, lists it with last4 only, tests it, removes it', async () => {
    const add = io(env);
    expect(await providersCommand.run(['add', id, '--base-url', `${up.url}/v1`, '--model', 'local-model'], add.io)).toBe(0);
    expect(add.out()).toContain(`keys set ${id}`);

    const set = io(env, `${KEY}\n`);
    expect(await keysCommand.run(['set', id], set.io), set.err()).toBe(0);
    expect(set.out()).toContain(`…${KEY.slice(-4)}`);
    expect(set.out()).toContain('OS keychain');

    const list = io(env);
    expect(await keysCommand.run(['list'], list.io)).toBe(0);
    expect(list.out()).toMatch(new RegExp(`${id}\\s+…${KEY.slice(-4)}\\s+keychain`));
    const json = io(env);
    await keysCommand.run(['list', '--json'], json.io);
    expect(JSON.parse(json.out()).keys.find((k: { provider: string }) => k.provider === id)).toMatchObject({ hasKey: true, storage: 'keychain' });

    const plist = io(env);
    await providersCommand.run(['list'], plist.io);
    expect(plist.out()).toMatch(new RegExp(`${id}\\s+openai-compatible\\s+${up.url.replace(/[.]/g, '\\.')}/v1\\s+key stored`));

    const test = io(env);
    expect(await keysCommand.run(['test', id], test.io)).toBe(0);
    expect(test.out()).toContain(`${id}: ok`);
    expect(up.requests.at(-1)?.headers.authorization).toBe(`Bearer ${KEY}`);

    // A new base URL, the key left as it is: the keychain entry still works against the new URL.
    const up2 = await startFakeUpstream({ expectedKey: KEY });
    try {
      const url = io(env);
      expect(await keysCommand.run(['set-url', id, `${up2.url}/v1`], url.io), url.err()).toBe(0);
      expect(url.out()).toBe(`${id} now calls ${up2.url}/v1; its key (…${KEY.slice(-4)}) is unchanged\n`);
      const retest = io(env);
      expect(await keysCommand.run(['test', id], retest.io)).toBe(0);
      expect(up2.requests.at(-1)?.headers.authorization).toBe(`Bearer ${KEY}`);
      await expect(keysCommand.run(['set-url', id, 'ftp://nope'], io(env).io)).rejects.toMatchObject({ kind: 'INVALID_INPUT', message: expect.stringContaining('http(s) URL') });
      seen.push(url.out(), retest.out());
    } finally {
      await up2.close();
    }

    const del = io(env);
    expect(await keysCommand.run(['rm', id], del.io)).toBe(0);
    const test2 = io(env);
    expect(await keysCommand.run(['test', id], test2.io)).toBe(1);
    expect(test2.out()).toContain('bad-key');
    seen.push(add.out(), set.out(), set.err(), list.out(), json.out(), plist.out(), test.out(), del.out(), test2.out());
    for (const f of await readdir(home, { recursive: true, withFileTypes: true })) {
      if (f.isFile()) expect(await readFile(path.join(f.parentPath, f.name), 'utf8')).not.toContain(KEY);
    }
  });

  it('refuses a key on the command line without echoing it, and empty stdin', async () => {
    const argv = io(env);
    await expect(keysCommand.run(['set', id, KEY], argv.io)).rejects.toMatchObject({ kind: 'INVALID_INPUT', message: expect.not.stringContaining(KEY) });
    await expect(keysCommand.run(['set', id, `--key=${KEY}`], argv.io)).rejects.toMatchObject({ kind: 'INVALID_INPUT', message: expect.not.stringContaining(KEY) });
    const empty = io(env, '');
    await expect(keysCommand.run(['set', id], empty.io)).rejects.toMatchObject({ kind: 'INVALID_INPUT' });
    await expect(keysCommand.run(['bogus'], io(env).io)).rejects.toMatchObject({ name: 'CliUsageError', kind: 'INVALID_INPUT' });
    await expect(providersCommand.run(['add', 'x-y'], io(env).io)).rejects.toMatchObject({ kind: 'INVALID_INPUT' });
  });
  it('stores a Claude setup token from stdin and imports a Codex sign-in from a file, printing neither', async () => {
    const subEnv = { ...env, AIRLOCK_KEYCHAIN_SERVICE: `airlock-test-cli-${randomBytes(3).toString('hex')}` };
    const token = `sk-ant-oat01-${randomBytes(16).toString('hex')}`;
    const refresh = `rt-${randomBytes(16).toString('hex')}`;
    const access = `at-${randomBytes(16).toString('hex')}`;
    const part = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
    const idToken = `${part({ alg: 'RS256' })}.${part({ 'https://api.openai.com/auth': { chatgpt_account_id: 'acct-cli' } })}.sig`;
    const authFile = path.join(home, 'codex-auth.json');
    await writeFile(authFile, JSON.stringify({ tokens: { id_token: idToken, access_token: access, refresh_token: refresh, account_id: 'acct-cli' }, last_refresh: new Date().toISOString() }, null, 2));
    try {
      const sub = io(subEnv, `${token}\n`);
      expect(await keysCommand.run(['set-subscription', 'claude'], sub.io), sub.err()).toBe(0);
      expect(sub.out()).toContain('serves only Claude Code');
      const imp = io(subEnv);
      expect(await keysCommand.run(['import-codex', '--from', authFile], imp.io), imp.err()).toBe(0);
      expect(imp.out()).toContain('serves only Codex');
      const list = io(subEnv);
      expect(await keysCommand.run(['list'], list.io)).toBe(0);
      expect(list.out()).toMatch(/claude-subscription\s+subscription …\w{4}\s+keychain/);
      expect(list.out()).toMatch(/chatgpt-signin\s+signed in\s+keychain/);
      // An API key cannot go where a subscription belongs, and the other way round.
      await expect(keysCommand.run(['set', 'claude-subscription'], io(subEnv, `${token}\n`).io)).rejects.toMatchObject({ kind: 'INVALID_INPUT', message: expect.stringContaining('set-subscription claude') });
      const missing = io(subEnv);
      await expect(keysCommand.run(['import-codex', '--from', path.join(home, 'nope.json')], missing.io)).rejects.toMatchObject({ kind: 'NOT_FOUND', message: expect.stringContaining('codex login') });
      for (const text of [sub.out(), sub.err(), imp.out(), imp.err(), list.out()]) for (const secret of [token, refresh, access]) expect(text).not.toContain(secret);
    } finally {
      await keysCommand.run(['rm', 'claude-subscription'], io(subEnv).io).catch(() => undefined);
      await keysCommand.run(['rm', 'chatgpt-signin'], io(subEnv).io).catch(() => undefined);
      await rm(authFile, { force: true });
    }
  });
});
