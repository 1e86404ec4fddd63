import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { captureIo } from '../../../test/support/cli-io';
import type * as ClientGrantsModule from '../../runs/client-grants';

const announced = vi.hoisted(() => ({ homes: [] as string[] }));
vi.mock('../../runs/client-grants', async (importOriginal) => {
  const real = await importOriginal<typeof ClientGrantsModule>();
  return {
    ...real,
    announceApp: (home: string) => {
      announced.homes.push(home);
      return real.announceApp(home);
    },
  };
});

const { createAirlockCore } = await import('../../app');
const { servicesFor } = await import('../../app-services');
const { runCommand } = await import('./run');
const { compareCommand } = await import('./compare');

/**
 * Only a process that can ask the user (the app, `airlock serve`) announces itself as the one that
 * answers MCP folder requests (docs/architecture.md §17). `airlock run` and `airlock compare` show no
 * such question: announced, a client's request would wait on them for nothing.
 */
describe('CLI commands do not announce themselves as the app that answers MCP requests', () => {
  let home: string;
  beforeEach(async () => {
    home = await mkdtemp(join(tmpdir(), 'airlock-mcp-presence-'));
    announced.homes.length = 0;
  });
  afterEach(async () => {
    await rm(home, { recursive: true, force: true });
  });
  const env = () => ({ ...process.env, AIRLOCK_HOME: home, AIRLOCK_KEYCHAIN_SERVICE: `airlock-presence-${process.pid}` });

  it('airlock run (up to its services, here a past run that does not exist)', async () => {
    const { io } = captureIo(env());
    await expect(runCommand.run(['--again', 'r-mabc12-0123abcd'], io)).rejects.toMatchObject({ kind: 'NOT_FOUND' });
    expect(announced.homes).toEqual([]);
  });

  it('airlock compare', async () => {
    const { io } = captureIo(env());
    await expect(compareCommand.run(['g-mabc12-0123abcd'], io)).rejects.toBeTruthy();
    expect(announced.homes).toEqual([]);
  });

  it('the app (asksForMcp) does', async () => {
    const services = servicesFor(await createAirlockCore({ env: env(), recover: false }), undefined, { asksForMcp: true });
    await services.dispose();
    expect(announced.homes).toEqual([home]);
  });
});
