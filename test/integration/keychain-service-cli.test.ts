import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAirlockCore } from '../../core/app';
import { servicesFor } from '../../core/app-services';
import { runDoctor } from '../../core/cli/commands/doctor';
import type { CliIo } from '../../core/cli/command';
import { main } from '../../core/cli/main';
import { keychainCheck, providerKeysCheck, runDoctorChecks } from '../../core/doctor/doctor';
import { KeyVault } from '../../core/keys/key-vault';
import { ProviderCatalog } from '../../core/keys/provider-catalog';
import { startFakeUpstream, type FakeUpstream } from '../fixtures/fake-upstream';
import { requirePrerequisite } from '../support/prerequisites';

const keychain = await requirePrerequisite('keychain');

/** Captured streams for one CLI call. */
function cli(env: NodeJS.ProcessEnv, stdinText = ''): { io: CliIo; out: () => string; err: () => string } {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const stdin = new PassThrough();
  let o = '';
  let e = '';
  stdout.on('data', (c: Buffer) => (o += c));
  stderr.on('data', (c: Buffer) => (e += c));
  stdin.end(stdinText);
  return { io: { stdout, stderr, stdin, env }, out: () => o, err: () => e };
}

async function run(env: NodeJS.ProcessEnv, argv: string[], stdinText?: string): Promise<{ code: number; out: string; err: string }> {
  const c = cli(env, stdinText);
  const code = await main(argv, c.io);
  return { code, out: c.out(), err: c.err() };
}

/**
 * The composition root (docs/architecture.md §5): with `AIRLOCK_KEYCHAIN_SERVICE` set, every front end
 * opens the keychain under that one service and reads the one data folder. `providers list/rm` and
 * the setup check used to open the default service (listing "no key" and removing the wrong entry).
 */
describe.skipIf(!keychain.ok)('one keychain service and one home for every CLI command, the setup check and the core', () => {
  const service = `airlock-test-root-${randomBytes(4).toString('hex')}`;
  const id = `zz-root-${randomBytes(3).toString('hex')}`;
  const KEY = `sk-canary-root-${randomBytes(16).toString('hex')}`;
  let home: string;
  let env: NodeJS.ProcessEnv;
  /** The vault under the test's service, read directly: what is really in the keychain. */
  let direct: KeyVault;
  /** The setup check makes one real call with the stored key (the provider it will use): a model that answers. */
  let up: FakeUpstream;

  beforeAll(async () => {
    up = await startFakeUpstream({ expectedKey: KEY });
    home = await mkdtemp(path.join(os.tmpdir(), 'airlock-root-'));
    env = { ...process.env, AIRLOCK_HOME: home, AIRLOCK_KEYCHAIN_SERVICE: service };
    direct = new KeyVault(new ProviderCatalog({ home }), { service });
  });
  afterAll(async () => {
    await direct.remove(id).catch(() => false);
    direct.dispose();
    await up.close();
    await rm(home, { recursive: true, force: true });
  });

  it('keys, providers list/rm, the CLI doctor and the core see and remove the same entry', async () => {
    expect((await run(env, ['providers', 'add', id, '--base-url', `${up.url}/v1`, '--model', 'm'])).code).toBe(0);
    const set = await run(env, ['keys', 'set', id], `${KEY}\n`);
    expect(set.code, set.err).toBe(0);
    expect((await direct.info(id)).hasKey).toBe(true);

    const keys = JSON.parse((await run(env, ['keys', 'list', '--json'])).out) as { keys: Array<{ provider: string; hasKey: boolean }> };
    expect(keys.keys.find((k) => k.provider === id)?.hasKey).toBe(true);
    const providers = JSON.parse((await run(env, ['providers', 'list', '--json'])).out) as Array<{ id: string; hasKey: boolean }>;
    expect(providers.find((p) => p.id === id)?.hasKey).toBe(true);

    // The CLI's setup check, through the same shared pieces as the command line's.
    const doctor = cli(env);
    await runDoctor([keychainCheck, providerKeysCheck], doctor.io, { json: true, build: false, agents: false });
    const report = JSON.parse(doctor.out()) as { checks: Array<{ id: string; status: string; detail: string }> };
    expect(report.checks.find((c) => c.id === 'provider-keys')).toMatchObject({ status: 'ok', detail: expect.stringContaining(id) });

    // The core (desktop app, `airlock serve`) and its setup check: the same entry.
    const core = await createAirlockCore({ env, recover: false });
    const services = servicesFor(core);
    try {
      expect((await services.providers.list({})).find((p) => p.id === id)?.hasKey).toBe(true);
      const ui = await runDoctorChecks([providerKeysCheck], { app: core.app, env, options: { build: false, agents: false }, progress: () => undefined, progressDone: () => undefined });
      expect(ui.checks[0]).toMatchObject({ status: 'ok', detail: expect.stringContaining(id) });
    } finally {
      await services.dispose();
    }

    const removed = await run(env, ['providers', 'rm', id]);
    expect(removed.code, removed.err).toBe(0);
    expect((await direct.info(id).catch(() => ({ hasKey: false }))).hasKey).toBe(false);
    expect(await direct.remove(id)).toBe(false);
    for (const s of [set.out, set.err, doctor.out(), removed.out]) expect(s).not.toContain(KEY);
  });

  it('the setup check of a core made for another data folder reads that folder, not the environment\'s', async () => {
    const other = await mkdtemp(path.join(os.tmpdir(), 'airlock-root-other-'));
    const otherId = `zz-other-${randomBytes(3).toString('hex')}`;
    const core = await createAirlockCore({ env, home: other, recover: false });
    const services = servicesFor(core);
    try {
      await services.providers.add({ id: otherId, kind: 'openai-compatible', baseUrl: 'http://127.0.0.1:9/v1', requiresKey: false, models: ['m'] });
      const ui = await runDoctorChecks([providerKeysCheck], { app: core.app, env, options: { build: false, agents: false }, progress: () => undefined, progressDone: () => undefined });
      expect(ui.checks[0]?.detail).toContain(otherId);
      expect((await services.settings.appInfo({})).dataDir).toBe(other);
    } finally {
      await services.dispose();
      await rm(other, { recursive: true, force: true });
    }
  });
});
