/**
 * The host-run check cannot be steered from inside the sandbox (docs/architecture.md §18), in a real
 * hardened Docker sandbox: a shell function in the agent's `~/.bash_profile`, an alias in its
 * `~/.bashrc`, and a process it left forking would each have turned a failing `npm test` green under
 * the old `bash -lc` with the agent's home and a kill-only sweep; the check's invocation and the
 * sweep (as root, stop then kill, verified) leave the check failing as it should.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChannelClient } from '../../core/channel/channel-client';
import { checkInvocation, CHECK_PATH, stopLeftoverProcesses } from '../../core/runs/run-check';
import { DockerDriver } from '../../core/sandbox/docker/docker-driver';
import { DEFAULT_LIMITS } from '../../core/sandbox/driver';
import { ensureSandboxImage } from '../../core/sandbox/image';
import { requirePrerequisite } from '../support/prerequisites';
import { testEngine } from './sandbox-support';

const docker = await requirePrerequisite('docker');

describe.skipIf(!docker.ok)('a check nobody in the sandbox can steer', () => {
  const driver = new DockerDriver({ env: process.env, engine: testEngine() });
  const runId = `check-iso-${randomBytes(4).toString('hex')}`;
  let client: ChannelClient;

  beforeAll(async () => {
    const { ref } = await ensureSandboxImage({ env: process.env, engine: testEngine() });
    const info = await driver.create({ runId, image: ref, limits: DEFAULT_LIMITS, network: 'none' });
    client = await ChannelClient.connect(await driver.openChannel(info.id));
    // A project whose test fails, as the check should find.
    const setup = await client.run({ argv: ['sh', '-c', 'mkdir -p /workspace && cd /workspace && printf "%s" \'{"name":"p","scripts":{"test":"exit 3"}}\' > package.json && echo fail > verdict'] });
    expect(setup.exitCode).toBe(0);
  });

  afterAll(async () => {
    client?.dispose();
    const proof = await driver.destroy(runId);
    expect(proof.leftovers).toEqual([]);
  });

  const check = async (argv: string[], env: Record<string, string>) => {
    const r = await client.run({ argv, cwd: '/workspace', env });
    return { exitCode: r.exitCode, out: r.stdout.toString() + r.stderr.toString() };
  };

  it('a function in ~/.bash_profile or an alias in ~/.bashrc does not answer for npm', async () => {
    const home = (await client.run({ argv: ['sh', '-c', 'printf %s "$HOME"'] })).stdout.toString();
    expect(home).not.toBe('');
    const plant = await client.run({
      argv: ['sh', '-c', `printf '%s\\n' 'npm(){ echo "tests passed"; return 0; }' > "$HOME/.bash_profile"; printf '%s\\n' 'shopt -s expand_aliases' 'alias npm="echo tests passed; true"' > "$HOME/.bashrc"; printf '%s\\n' 'npm(){ echo tests passed; }' > /tmp/env.sh`],
    });
    expect(plant.exitCode).toBe(0);
    // The old invocation: a login shell with the agent's home is fooled.
    const old = await check(['bash', '-lc', 'npm test'], { HOME: home, BASH_ENV: '/tmp/env.sh' });
    expect(old.exitCode).toBe(0);
    expect(old.out).toContain('tests passed');
    // The check's invocation: no profile, no rc, no BASH_ENV, a fresh home, a fixed PATH.
    const inv = checkInvocation('npm test; echo "HOME=$HOME PATH=$PATH"', { HOME: home, BASH_ENV: '/tmp/env.sh', ENV: '/tmp/env.sh', CI: '1' }, `/tmp/airlock-check-home-${randomBytes(4).toString('hex')}`);
    expect(inv.argv.slice(0, 3)).toEqual(['bash', '--noprofile', '--norc']);
    const now = await check(inv.argv, inv.env);
    expect(now.out).not.toContain('tests passed');
    expect(now.out).toContain(`PATH=${CHECK_PATH}`);
    expect(now.out).not.toContain(`HOME=${home} `);
    expect(inv.env.CI).toBe('1');
    // `npm test; echo …` ends with echo's 0; the test itself must fail:
    const plain = checkInvocation('npm test', { HOME: home, BASH_ENV: '/tmp/env.sh' }, `/tmp/airlock-check-home-${randomBytes(4).toString('hex')}`);
    expect((await check(plain.argv, plain.env)).exitCode).toBe(3);
  });

  it('a home that already exists is not used (the check does not start)', async () => {
    await client.run({ argv: ['mkdir', '-p', '/tmp/airlock-check-home-taken'] });
    const inv = checkInvocation('true', {}, '/tmp/airlock-check-home-taken');
    expect((await check(inv.argv, inv.env)).exitCode).toBe(125);
  });

  it('the sweep stops and kills a process the agent left forking, and verifies none is left', async () => {
    // Each link forks the next and exits, rewriting the verdict the check reads: a moving target.
    const chain = `link(){ echo pass > /workspace/verdict; (link &); }; link`;
    await client.run({ argv: ['sh', '-c', `setsid bash -c '${chain}' >/dev/null 2>&1 < /dev/null &`] });
    await client.run({ argv: ['sh', '-c', 'setsid sh -c "trap \\"\\" TERM HUP; sleep 600" >/dev/null 2>&1 < /dev/null &'] });
    const killed = await stopLeftoverProcesses({ channel: client } as Parameters<typeof stopLeftoverProcesses>[0]);
    expect(typeof killed).toBe('number');
    expect(killed as number).toBeGreaterThanOrEqual(2);
    // Verified through a root view of /proc: nothing of the agent's uid runs.
    const ps = await client.run({ argv: ['sh', '-c', `for d in /proc/[0-9]*; do awk '/^Uid:/{u=$2} /^State:/{s=$2} END{if (u==${client.hello.agentUid} && s!="Z") print FILENAME}' $d/status 2>/dev/null; done`], as: 'helper' });
    expect(ps.stdout.toString().trim()).toBe('');
    await client.run({ argv: ['sh', '-c', 'echo fail > /workspace/verdict'] });
    const inv = checkInvocation('test "$(cat verdict)" = pass', {}, `/tmp/airlock-check-home-${randomBytes(4).toString('hex')}`);
    expect((await check(inv.argv, inv.env)).exitCode).toBe(1);
  });
});
