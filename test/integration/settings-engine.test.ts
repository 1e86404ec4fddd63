/**
 * The engine settings against the real core and the real engine: a bad `engineHost` is refused on
 * the field and nothing is saved; Check connection runs the setup check's engine check on entered
 * values; a saved change switches engines for the next sandbox while a sandbox in use keeps its own
 * (docs/architecture.md §13, "Changing engines").
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AirlockError } from '../../contracts/errors';
import type { AirlockServices } from '../../core/api/services';
import { createAirlockCore, type AirlockCore } from '../../core/app';
import { servicesFor } from '../../core/app-services';
import { DEFAULT_LIMITS } from '../../core/sandbox/driver';
import { QemuDriver } from '../../core/sandbox/qemu/qemu-driver';
import { vmPaths } from '../../core/sandbox/qemu/vm-paths';
import { requirePrerequisite } from '../support/prerequisites';
import { sandboxImage, testRunId, testEngine } from './sandbox-support';

const docker = await requirePrerequisite('docker');
// VM managers are made (not booted) when QEMU and the prepared kernel are here; required under CI like every VM test.
const qemu = await requirePrerequisite('qemu');
const vmReady = qemu.ok && process.platform === 'linux' && (await new QemuDriver({ env: process.env, engine: testEngine }).checkAvailable().then(() => true, () => false));
if (qemu.ok && !vmReady && process.env.CI) throw new Error('CI needs the VM kernel and initramfs: run scripts/prepare-vm-assets.sh');
const SOCKET = '/var/run/docker.sock';

async function refusal(p: Promise<unknown>): Promise<AirlockError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(AirlockError);
    return err as AirlockError;
  }
  throw new Error('expected a refusal');
}

describe.skipIf(!docker.ok)('engine settings (real core, real engine)', () => {
  let home: string;
  let core: AirlockCore;
  let services: AirlockServices;

  beforeAll(async () => {
    home = await mkdtemp(path.join(tmpdir(), 'airlock-settings-engine-'));
    // No overrides from the environment: the settings alone decide.
    const { AIRLOCK_ENGINE_HOST: _h, AIRLOCK_ENGINE: _e, AIRLOCK_VM_ACCEL: _v, ...env } = process.env;
    // The machine's prepared VM kernel (it lives under the default home); only read, never booted here.
    core = await createAirlockCore({ env: { ...env, AIRLOCK_HOME: home, AIRLOCK_VM_ASSETS: vmPaths(process.env).assetsDir, AIRLOCK_KEYCHAIN_SERVICE: `airlock-settings-engine-${process.pid}` }, home, recover: false });
    services = servicesFor(core);
  });

  afterAll(async () => {
    await services?.dispose();
    await rm(home, { recursive: true, force: true });
  });

  it('refuses a bad engine address on its field and saves nothing', async () => {
    const before = await services.settings.get({});
    for (const bad of ['ftp://build-box', 'build box', 'tcp://build-box', 'ssh://me@box/path']) {
      const err = await refusal(services.settings.update({ engineHost: bad, theme: 'dark' }));
      expect(err.kind).toBe('INVALID_INPUT');
      expect(err.field).toBe('engineHost');
      expect(err.message).toMatch(/not an engine address|Use ssh:\/\/user@host/);
    }
    // Plain tcp:// to another machine is refused unless allowed, with why.
    const insecure = await refusal(services.settings.update({ engineHost: 'tcp://build-box.invalid:2375' }));
    expect(insecure.field).toBe('engineHost');
    expect(insecure.message).toMatch(/plain, unencrypted TCP/);
    // A context that does not exist is named.
    expect((await refusal(services.settings.update({ engineHost: 'no-such-context' }))).message).toMatch(/context 'no-such-context' was not found/);
    expect(await services.settings.get({})).toEqual(before);
    await expect(readFile(path.join(home, 'settings.json'), 'utf8')).rejects.toMatchObject({ code: 'ENOENT' });

    // Allowed explicitly, the same address is saved (it is not contacted on save).
    const saved = await services.settings.update({ engineHost: 'tcp://build-box.invalid:2375', engineAllowInsecure: true });
    expect(saved).toMatchObject({ engineHost: 'tcp://build-box.invalid:2375', engineAllowInsecure: true });
    // Turning the permission off again while that address is saved is refused the same way.
    expect((await refusal(services.settings.update({ engineAllowInsecure: false }))).field).toBe('engineHost');
    await services.settings.update({ engineHost: '', engineAllowInsecure: false });
  });

  it('Check connection runs the engine check on the values entered, without saving them', async () => {
    const ok = await services.settings.checkEngine({ engine: 'docker', engineHost: `unix://${SOCKET}` });
    expect(ok.check).toMatchObject({ id: 'docker.engine', status: 'ok' });
    expect(ok.engine).toMatchObject({ kind: 'docker', address: `unix://${SOCKET}`, transport: 'unix', remote: false, source: 'setting' });
    expect(ok.engine?.version).toMatch(/^\d+\./);
    expect(ok.engine?.summary).toContain(`on the local socket ${SOCKET}`);

    const missing = await services.settings.checkEngine({ engineHost: `unix://${home}/no-engine.sock` });
    expect(missing.check.status).toBe('fail');
    expect(missing.check.detail).toContain('not answering');
    expect(missing.check.fix).toBeTruthy();
    expect(missing.engine).toBeUndefined();

    const bad = await refusal(services.settings.checkEngine({ engineHost: 'ftp://x' }));
    expect(bad.field).toBe('engineHost');
    expect((await services.settings.get({})).engineHost ?? '').toBe('');
  });

  it('a saved engine change applies to the next sandbox; a sandbox in use keeps its engine', async () => {
    const image = await sandboxImage();
    const first = await core.engine();
    const oldManager = await core.sandboxes('container');
    const sandbox = await oldManager.create({ runId: testRunId(), image, limits: DEFAULT_LIMITS, network: 'none' });
    try {
      await services.settings.update({ engineHost: `unix://${SOCKET}` });
      const next = await core.engine();
      expect(next).not.toBe(first);
      expect(next.endpoint.display).toBe(`unix://${SOCKET}`);
      expect(next.endpoint.description.source).toBe('setting');
      const newManager = await core.sandboxes('container');
      expect(newManager).not.toBe(oldManager);

      // The running sandbox is untouched: its channel is open and its engine still answers.
      expect(sandbox.channel.isClosed).toBe(false);
      expect((await first.docker.ping()).toString()).toBe('OK');
      // The old manager is retiring: it waits for this sandbox before its engine is closed.
      let retired = false;
      const retiring = oldManager.retire().then(() => (retired = true));
      // Let everything already due run (the engine's answers arrive as I/O): retiring still waits.
      await new Promise((r) => setImmediate(r));
      expect(retired).toBe(false);
      const proof = await sandbox.destroy();
      expect(proof.leftovers).toEqual([]);
      await retiring;
      expect(retired).toBe(true);

      // Unrelated settings do not switch engines (nor does a VM setting).
      await services.settings.update({ theme: 'light' });
      expect(await core.engine()).toBe(next);
    } finally {
      await sandbox.destroy().catch(() => undefined);
    }
  });

  it.skipIf(!vmReady)('a saved vmAccel change gives the next VM a driver with it; the engine stays', async () => {
    await services.settings.update({ vmAccel: 'kvm' });
    const engine = await core.engine();
    const first = await core.sandboxes('vm');
    expect((await (first.driver as QemuDriver).accel()).accel).toBe('kvm');
    await services.settings.update({ vmAccel: 'tcg' });
    const next = await core.sandboxes('vm');
    expect(next).not.toBe(first);
    expect(await (next.driver as QemuDriver).accel()).toMatchObject({ accel: 'tcg', reason: 'software emulation chosen by the vmAccel setting' });
    await first.retire(); // nothing was running on it: retired at once
    expect(await core.engine()).toBe(engine);
  });
  it.skipIf(!vmReady)('VM isolation reads the sandbox image from the engine the settings chose (a second endpoint), not the ambient one', async () => {
    // A second endpoint to the same engine, made here: a Unix socket that forwards to it and records
    // every request line. The settings name it; the process environment still names the default socket.
    const dir = await mkdtemp(path.join(tmpdir(), 'airlock-engine-proxy-'));
    const socket = path.join(dir, 'engine.sock');
    const seen: string[] = [];
    const proxy = createServer((client) => {
      const upstream = connect(SOCKET);
      client.on('data', (d: Buffer) => {
        for (const m of d.toString('latin1').matchAll(/^(?:GET|POST|PUT|DELETE|HEAD) (\S+) HTTP\/1\.[01]\r$/gm)) seen.push(m[1] as string);
      });
      client.pipe(upstream).pipe(client);
      client.on('error', () => upstream.destroy());
      upstream.on('error', () => client.destroy());
    });
    await new Promise<void>((r) => proxy.listen(socket, r));
    try {
      await services.settings.update({ engineHost: `unix://${socket}` });
      const vm = await core.sandboxes('vm');
      // An image no engine has: the VM's disk is asked for on the chosen engine and refused by name,
      // before anything is built or booted.
      const image = `airlock-test/not-on-any-engine:${process.pid}`;
      const err = await refusal(vm.create({ runId: testRunId(), image, limits: DEFAULT_LIMITS, network: 'none' }));
      expect(err.message).toContain(image);
      expect(seen.some((p) => decodeURIComponent(p).includes(`/images/${image}/json`)), seen.join('\n')).toBe(true);
    } finally {
      await services.settings.update({ engineHost: `unix://${SOCKET}` });
      await new Promise<void>((r) => proxy.close(() => r()));
      await rm(dir, { recursive: true, force: true });
    }
  });
});
