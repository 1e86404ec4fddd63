import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAirlockCore } from '../../core/app';
import { servicesFor } from '../../core/app-services';
import type { AirlockServices } from '../../core/api/services';
import { main } from '../../core/cli/main';
import { captureIo } from '../support/cli-io';
import { requirePrerequisite } from '../support/prerequisites';
import { sandboxImage } from './sandbox-support';

const docker = await requirePrerequisite('docker');

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
    expect(ui.checks.map((c) => c.id)).toEqual(['docker.engine', 'image', 'helper', 'keychain', 'isolation']);
    expect(cli.checks.map((c) => [c.id, c.status])).toEqual(ui.checks.map((c) => [c.id, c.status]));
    // The UI now starts a throwaway sandbox too, and sees it wiped.
    expect(ui.checks.find((c) => c.id === 'helper')).toMatchObject({ status: expect.stringMatching(/^(ok|warn)$/), detail: expect.stringContaining('with nothing left') });
    for (const c of ui.checks) expect(['ok', 'warn', 'fail', 'skipped']).toContain(c.status);
  }, 120_000);
});
