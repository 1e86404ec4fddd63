/**
 * Internal hosts (docs/architecture.md §2.8): a private (LAN) address is refused unless the user named
 * the host as internal, and the refusal names the flag; loopback, link-local and metadata addresses
 * stay refused for every name. Nothing here dials an address: the decisions are made before that.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { StartRunInput } from '../../contracts/runs';
import { captureIo } from '../../test/support/cli-io';
import { networkCommand } from '../cli/commands/network';
import { internalHostName } from './address-checks';
import { Allowlist } from './allowlist';
import { addressRefusal, EgressPolicy, Refusal } from './egress-policy';
import { ProjectNetworkStore } from './project-network-store';

const homes: string[] = [];
afterAll(async () => {
  for (const h of homes) await rm(h, { recursive: true, force: true });
});

const HOST = 'git.corp.airlock.test';

function policy(addresses: string[], internalHosts: string[]): EgressPolicy {
  return new EgressPolicy(new Allowlist([`${HOST}:443`]), { runId: 'run-internal', resolve: async () => addresses, connectTimeoutMs: 5_000, allowLoopback: false, internalHosts });
}

describe('internal hosts', () => {
  it('a private address is refused with the flag that allows it, and passes for the host named as internal', async () => {
    const refused = await policy(['10.20.30.40'], []).decide('connect', HOST, 443).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(Refusal);
    expect((refused as Refusal).reason).toBe(`resolves to a private address (10.20.30.40); if ${HOST} is a server of your own network, allow it by name with --internal-host ${HOST}`);
    expect((refused as Refusal).body).toContain(`--internal-host ${HOST}`);
    await expect(policy(['10.20.30.40', 'fd00::7'], [HOST.toUpperCase()]).decide('connect', HOST, 443)).resolves.toEqual({ host: HOST, addresses: ['10.20.30.40', 'fd00::7'] });
    // Another name is not widened by it.
    expect(addressRefusal('other.airlock.test', ['192.168.1.9'], { internal: false })).toContain('--internal-host other.airlock.test');
  });

  it('loopback, link-local, metadata and any bad record among private ones stay refused for an internal host', async () => {
    for (const bad of ['127.0.0.1', '169.254.169.254', 'fe80::1', '::1', '0.0.0.0']) {
      const why = addressRefusal(HOST, ['10.0.0.5', bad], { internal: true });
      expect(why, bad).toMatch(/^resolves to /);
      expect(why, bad).not.toContain('--internal-host');
      await expect(policy(['10.0.0.5', bad], [HOST]).decide('connect', HOST, 443)).rejects.toBeInstanceOf(Refusal);
    }
  });

  it('is one exact name: no wildcard, no address', () => {
    expect(internalHostName(' Git.Corp.Airlock.Test. ')).toBe(HOST);
    for (const bad of ['*.corp.test', '10.0.0.1', '0x0a000001', '[fd00::1]', 'fd00::1', '']) expect(() => internalHostName(bad), bad).toThrow(/exact host name/);
    expect(() => policy([], ['*.corp.test'])).toThrow(/exact host name/);
    const base = { projectDir: '/p', task: 't', provider: 'anthropic', model: 'm', network: 'allowlist', allowlist: [HOST] } as const;
    expect(StartRunInput.parse({ ...base, internalHosts: ['Git.Corp.Airlock.Test'] }).internalHosts).toEqual([HOST]);
    for (const bad of ['*.corp.test', '10.1.2.3', 'host:8443', 'a b']) expect(StartRunInput.safeParse({ ...base, internalHosts: [bad] }).success, bad).toBe(false);
    expect(StartRunInput.safeParse({ ...base, network: 'none', allowlist: undefined, internalHosts: [HOST] }).success).toBe(false);
  });

  it('airlock network allow --internal keeps the name for the project; remove drops it; check judges the address', async () => {
    const home = await mkdtemp(path.join(os.tmpdir(), 'airlock-internal-'));
    homes.push(home);
    const project = path.join(home, 'proj');
    const cli = async (args: string[], addresses: string[] = ['10.9.8.7']) => {
      const { io, out } = captureIo({ ...process.env, AIRLOCK_HOME: home });
      io.egressProxyForTests = { resolve: async () => addresses };
      const code = await networkCommand.run(args, io);
      return { code, out: out() };
    };
    await expect(cli(['allow', '*.corp.airlock.test', '--internal', '--project', project])).rejects.toMatchObject({ kind: 'INVALID_INPUT' });
    const store = new ProjectNetworkStore(project, home);
    expect(await store.load()).toEqual([]);

    const url = `https://${HOST}:8443/team/repo.git/info/refs?service=git-upload-pack`;
    const before = await cli(['check', url, '--allow', `${HOST}:8443`, '--json']);
    expect(before.code).not.toBe(0);
    expect(JSON.parse(before.out)).toMatchObject({ allowed: false, decidedBy: 'address', reason: expect.stringContaining(`--internal-host ${HOST}`) });
    const flagged = await cli(['check', url, '--allow', `${HOST}:8443`, '--internal-host', HOST, '--json']);
    expect(JSON.parse(flagged.out)).toMatchObject({ allowed: true, decidedBy: 'tunnel' });
    expect((await cli(['check', url, '--allow', `${HOST}:8443`, '--internal-host', HOST, '--json'], ['169.254.169.254'])).code).not.toBe(0);

    expect((await cli(['allow', `${HOST}:8443`, '--internal', '--project', project])).out).toContain(`internal hosts (may resolve to private addresses):\n  ${HOST}`);
    expect(JSON.parse(await readFile(store.file, 'utf8'))).toMatchObject({ allow: [{ host: HOST, ports: [8443] }], internalHosts: [HOST] });
    // The project's choice is what a check of the project (and a run of it) starts with.
    expect(JSON.parse((await cli(['check', url, '--project', project, '--json'])).out)).toMatchObject({ allowed: true });
    await cli(['remove', HOST, '--project', project]);
    expect(await store.loadInternalHosts()).toEqual([]);
    expect(JSON.parse((await cli(['check', url, '--project', project, '--allow', `${HOST}:8443`, '--json'])).out)).toMatchObject({ allowed: false, decidedBy: 'address' });
  });
});
