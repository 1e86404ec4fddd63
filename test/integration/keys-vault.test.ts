import { AsyncEntry } from '@napi-rs/keyring';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { inspect } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyVault } from '../../core/keys/key-vault';
import { ProviderCatalog } from '../../core/keys/provider-catalog';
import { startFakeUpstream, type FakeUpstream } from '../fixtures/fake-upstream';
import { requirePrerequisite } from '../support/prerequisites';

const keychain = await requirePrerequisite('keychain');
const repo = path.resolve(import.meta.dirname, '../..');

async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) out.push(path.join(e.parentPath, e.name));
  }
  return out;
}

describe.skipIf(!keychain.ok)('KeyVault over the real Secret Service', () => {
  let home: string;
  let catalog: ProviderCatalog;
  let vault: KeyVault;
  let up: FakeUpstream;
  // A unique provider id keeps this test off any real entries, while using the real layout (service `airlock`).
  const provider = `zz-test-${randomBytes(3).toString('hex')}`;
  const KEY = `sk-canary-${randomBytes(16).toString('hex')}`;

  beforeAll(async () => {
    home = await mkdtemp(path.join(os.tmpdir(), 'airlock-keys-'));
    up = await startFakeUpstream({ expectedKey: KEY });
    catalog = new ProviderCatalog({ home });
    await catalog.add({ id: provider, baseUrl: `${up.url}/v1` });
    vault = new KeyVault(catalog, { service: 'airlock' });
  });
  afterAll(async () => {
    await vault.remove(provider).catch(() => undefined);
    vault.dispose();
    await up.close();
    await rm(home, { recursive: true, force: true });
  });

  it('reports the keychain available', async () => {
    expect(await vault.status()).toEqual({ available: true });
  });

  it('stores the key in the OS keychain (service airlock, one entry per provider) and never in a file', async () => {
    const changes: string[] = [];
    const sub = vault.onDidChange((e) => changes.push(e.provider));
    const info = await vault.set(provider, KEY);
    sub.dispose();
    expect(changes).toEqual([provider]);
    expect(info).toMatchObject({ provider, hasKey: true, last4: KEY.slice(-4), baseUrl: `${up.url}/v1`, storage: 'keychain' });
    expect(Date.parse(info.addedAt ?? '')).toBeGreaterThan(0);
    expect(JSON.stringify(info)).not.toContain(KEY);
    expect(await new AsyncEntry('airlock', provider).getPassword()).toBe(KEY);
    for (const f of await filesUnder(home)) expect(await readFile(f, 'utf8')).not.toContain(KEY);

    // A second vault (another process, the CLI) sees the same entry.
    const other = new KeyVault(new ProviderCatalog({ home }), { service: 'airlock' });
    const resolved = await other.resolve(provider);
    expect(resolved?.storage).toBe('keychain');
    expect(resolved?.secret.reveal()).toBe(KEY);
    expect(inspect(resolved)).not.toContain(KEY);
    expect(JSON.stringify(resolved)).not.toContain(KEY);
    const listed = await other.list();
    expect(listed.find((k) => k.provider === provider)).toMatchObject({ hasKey: true, last4: KEY.slice(-4) });
    expect(listed.find((k) => k.provider === 'anthropic')).toBeDefined();
    expect(JSON.stringify(listed)).not.toContain(KEY);
  });

  it('tests the connection: ok, bad key, rate-limited, unreachable — without the key in any message', async () => {
    const ok = await vault.test(provider);
    expect(ok.status).toBe('ok');
    expect(up.requests.at(-1)?.headers.authorization).toBe(`Bearer ${KEY}`);
    up.setScript([{ status: 429 }]);
    expect((await vault.test(provider)).status).toBe('rate-limited');

    const badProvider = `${provider}-bad`;
    await catalog.add({ id: badProvider, baseUrl: `${up.url}/v1` });
    await vault.set(badProvider, 'sk-wrong-key-000000000000', { storage: 'session' });
    const bad = await vault.test(badProvider);
    expect(bad.status).toBe('bad-key');

    const dead = await startFakeUpstream();
    await catalog.setBaseUrl(badProvider, `${dead.url}/v1`);
    await dead.close();
    expect((await vault.test(badProvider)).status).toBe('unreachable');
    for (const r of [ok, bad]) expect(JSON.stringify(r)).not.toContain(KEY);
    await vault.remove(badProvider);
    await catalog.remove(badProvider);
  });

  it('session-only and env keys are explicit, in memory, and take precedence for this process', async () => {
    const sessionKey = `sk-session-${randomBytes(8).toString('hex')}`;
    await vault.set(provider, sessionKey, { storage: 'session' });
    expect((await vault.info(provider)).storage).toBe('session');
    expect((await vault.resolve(provider))?.secret.reveal()).toBe(sessionKey);
    // The keychain entry was left alone.
    expect(await new AsyncEntry('airlock', provider).getPassword()).toBe(KEY);
    vault.useEnvKey(provider, 'AIRLOCK_TEST_KEY_VAR', { AIRLOCK_TEST_KEY_VAR: 'sk-from-env-0123456789' });
    expect(await vault.info(provider)).toMatchObject({ storage: 'env', last4: '6789' });
    expect(() => vault.useEnvKey(provider, 'AIRLOCK_UNSET_VAR', {})).toThrow(expect.objectContaining({ kind: 'KEY_MISSING' }));
    for (const f of await filesUnder(home)) expect(await readFile(f, 'utf8')).not.toContain(sessionKey);
  });

  it('removes the key from the keychain', async () => {
    expect(await vault.remove(provider)).toBe(true);
    expect(await new AsyncEntry('airlock', provider).getPassword()).toBeNull();
    expect(await vault.info(provider)).toMatchObject({ hasKey: false, last4: null, addedAt: null });
    await expect(vault.require(provider)).rejects.toMatchObject({ kind: 'KEY_MISSING', message: expect.stringContaining('airlock keys set') });
    await expect(vault.set(provider, 'short')).rejects.toMatchObject({ kind: 'INVALID_INPUT' });
    await expect(vault.set('no-such-provider', KEY)).rejects.toMatchObject({ kind: 'PROVIDER_UNKNOWN' });
  });

  it('without a Secret Service: KEYCHAIN_UNAVAILABLE with how to fix it, session-only still works, no file written', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-nokeychain-'));
    const script = path.join(dir, 'probe.mts');
    const child = `
      import { KeyVault } from ${JSON.stringify(path.join(repo, 'core/keys/key-vault.ts'))};
      import { ProviderCatalog } from ${JSON.stringify(path.join(repo, 'core/keys/provider-catalog.ts'))};
      const vault = new KeyVault(new ProviderCatalog({ home: process.env.AIRLOCK_HOME }), { service: 'airlock' });
      const out = { status: await vault.status() };
      try { await vault.set('openai', process.env.PROBE_KEY); out.set = 'stored'; } catch (e) { out.set = { kind: e.kind, message: e.message }; }
      try { await vault.resolve('openai'); out.get = 'no error'; } catch (e) { out.get = e.kind; }
      const session = await vault.set('openai', process.env.PROBE_KEY, { storage: 'session' });
      out.session = session;
      out.list = (await vault.list()).find((k) => k.provider === 'openai');
      console.log(JSON.stringify(out));
    `;
    await writeFile(script, child);
    const probeKey = `sk-canary-${randomBytes(12).toString('hex')}`;
    const { stdout, stderr, code } = await new Promise<{ stdout: string; stderr: string; code: number | null }>((resolve) => {
      const env = { ...process.env, DBUS_SESSION_BUS_ADDRESS: `unix:path=${path.join(dir, 'no-bus')}`, AIRLOCK_HOME: path.join(dir, 'home'), PROBE_KEY: probeKey };
      const p = spawn(process.execPath, ['--import', 'tsx', script], { cwd: repo, env });
      let o = '';
      let e = '';
      p.stdout.on('data', (c: Buffer) => (o += c));
      p.stderr.on('data', (c: Buffer) => (e += c));
      p.on('close', (c) => resolve({ stdout: o, stderr: e, code: c }));
    });
    expect(stderr).not.toContain(probeKey);
    expect(code, stderr).toBe(0);
    expect(stdout).not.toContain(probeKey);
    const out = JSON.parse(stdout) as Record<string, any>;
    expect(out.status.available).toBe(false);
    expect(out.status.message).toMatch(/gnome-keyring-daemon --unlock/);
    expect(out.set.kind).toBe('KEYCHAIN_UNAVAILABLE');
    expect(out.set.message).toMatch(/session only/i);
    expect(out.set.message).toMatch(/never writes keys to a plain file/);
    expect(out.get).toBe('KEYCHAIN_UNAVAILABLE');
    expect(out.session).toMatchObject({ hasKey: true, storage: 'session', last4: probeKey.slice(-4) });
    expect(out.list).toMatchObject({ hasKey: true, storage: 'session' });
    for (const f of await filesUnder(dir)) expect(await readFile(f, 'utf8')).not.toContain(probeKey);
    await rm(dir, { recursive: true, force: true });
  });
});
