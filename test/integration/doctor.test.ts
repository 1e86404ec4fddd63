import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAirlockCore } from '../../core/app';
import { servicesFor } from '../../core/app-services';
import type { AirlockServices } from '../../core/api/services';
import { main } from '../../core/cli/main';
import { startFakeUpstream } from '../fixtures/fake-upstream';
import { captureIo } from '../support/cli-io';
import { requirePrerequisite } from '../support/prerequisites';
import { sandboxImage } from './sandbox-support';

const docker = await requirePrerequisite('docker');
const runsc = docker.ok ? await requirePrerequisite('runsc') : docker;

describe.skipIf(!docker.ok)('one doctor for the CLI and the UI (real engine)', () => {
  let home: string;
  let services: AirlockServices;

  beforeAll(async () => {
    await sandboxImage();
    home = await mkdtemp(path.join(os.tmpdir(), 'airlock-doctor-'));
    services = servicesFor(await createAirlockCore({ env: { ...process.env, AIRLOCK_HOME: home }, recover: false }));
  }, 600_000);
  afterAll(async () => {
    await services?.dispose();
    await rm(home, { recursive: true, force: true });
  });

  it('runs the same checks, with the same ids and statuses, in both', async () => {
    const ui = await services.sandboxes.doctor({});
    const { io, out } = captureIo({ ...process.env, AIRLOCK_HOME: home });
    await main(['doctor', '--json', '--no-build'], io);
    const cli = JSON.parse(out()) as typeof ui;
    expect(ui.checks.map((c) => c.id)).toEqual(expect.arrayContaining(['docker.engine', 'image', 'helper', 'keychain', 'provider-keys', 'isolation']));
    // A fresh home has no key: that is a warning with its fix, so the UI does not say "Ready".
    expect(ui.checks.find((c) => c.id === 'provider-keys')).toMatchObject({ status: 'warn', fixAction: 'add-key' });
    expect(cli.checks.map((c) => [c.id, c.status])).toEqual(ui.checks.map((c) => [c.id, c.status]));
    // The UI now starts a throwaway sandbox too, and sees it wiped.
    expect(ui.checks.find((c) => c.id === 'helper')).toMatchObject({ status: expect.stringMatching(/^(ok|warn)$/), detail: expect.stringContaining('with nothing left') });
    for (const c of ui.checks) expect(['ok', 'warn', 'fail', 'skipped']).toContain(c.status);
    // Which engine answered, its version and where; and whether gVisor can run on it.
    expect(ui.checks.find((c) => c.id === 'docker.engine')?.detail).toMatch(/^(rootless )?(Docker|Podman) \d+\.\S* /);
    const gvisor = ui.checks.find((c) => c.id === 'gvisor');
    if (runsc.ok) expect(gvisor).toMatchObject({ status: 'ok', detail: expect.stringContaining('runsc is registered with the Docker engine') });
    else expect(gvisor).toMatchObject({ status: 'warn', fix: expect.stringContaining('"runtimeArgs": ["--network=none"]') });
  }, 120_000);
  it('a stored key the provider refuses is to be replaced, not added', async () => {
    const up = await startFakeUpstream({ expectedKey: 'sk-ant-the-right-key-000000000000' });
    try {
      await services.keys.set({ provider: 'anthropic', key: 'sk-ant-a-refused-key-00000000000', baseUrl: up.url, storage: 'session' });
      const report = await services.sandboxes.doctor({});
      expect(report.checks.find((c) => c.id === 'provider-keys')).toMatchObject({ status: 'fail', fixAction: 'replace-key' });
    } finally {
      await services.keys.remove({ provider: 'anthropic' }).catch(() => undefined);
      await up.close();
    }
  }, 300_000);
});
