import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ProjectNetworkStore } from '../../network/project-network-store';
import { CliUsageError } from '../args';
import { captureIo } from '../../../test/support/cli-io';
import { networkCommand } from './network';

const homes: string[] = [];
afterAll(async () => {
  for (const h of homes) await rm(h, { recursive: true, force: true });
});

async function cli(args: string[], home: string): Promise<{ code: number; out: string; err: string }> {
  const { io, out, err } = captureIo({ ...process.env, AIRLOCK_HOME: home });
  const code = await networkCommand.run(args, io);
  return { code, out: out(), err: err() };
}

describe('airlock network', () => {
  it('allow / list / remove hosts for a project, stored where the proxy reads them', async () => {
    const home = await mkdtemp(path.join(os.tmpdir(), 'airlock-netcli-'));
    homes.push(home);
    const project = path.join(home, 'proj');
    expect((await cli(['allow', 'pkg.example.test', '*.cdn.example.test:443,8443', '--project', project], home)).code).toBe(0);
    expect(await new ProjectNetworkStore(project, home).load()).toEqual([
      { host: 'pkg.example.test' },
      { host: '*.cdn.example.test', ports: [443, 8443] },
    ]);
    const listed = await cli(['list', '--project', project, '--json'], home);
    expect(JSON.parse(listed.out)).toMatchObject({ project, allow: ['pkg.example.test', '*.cdn.example.test:443,8443'] });
    expect((await cli(['remove', 'pkg.example.test', '--project', project], home)).out).toContain('*.cdn.example.test:443,8443');
    expect(await new ProjectNetworkStore(project, home).load()).toEqual([{ host: '*.cdn.example.test', ports: [443, 8443] }]);
  });

  it('refuses bad entries before writing anything', async () => {
    const home = await mkdtemp(path.join(os.tmpdir(), 'airlock-netcli-'));
    homes.push(home);
    await expect(cli(['allow', 'ok.example.test', '10.0.0.1', '--project', home], home)).rejects.toMatchObject({ kind: 'INVALID_INPUT' });
    expect(await new ProjectNetworkStore(home, home).load()).toEqual([]);
    await expect(cli(['list'], home)).rejects.toMatchObject({ kind: 'INVALID_INPUT' });
    await expect(cli(['frobnicate'], home)).rejects.toBeInstanceOf(CliUsageError);
  });

  it('prints the presets derived from this machine', async () => {
    const r = await cli(['presets', '--json'], os.tmpdir());
    const presets = JSON.parse(r.out) as Array<{ name: string }>;
    expect(presets.map((p) => p.name)).toEqual(['npm', 'pip', 'cargo', 'go', 'apt']);
  });
});
