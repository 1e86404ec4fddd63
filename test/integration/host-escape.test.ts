/**
 * docs/architecture.md §2.3, "No way back to the host": the escapes of issue 35 tried on live sandboxes.
 *
 * 1. `open_by_handle_at` ("shocker"): as the helper's identity (root in the container with the helper's
 *    capabilities), on every host-backed file (/etc/hosts, /etc/hostname, /etc/resolv.conf, the workspace
 *    and state volumes), the call is refused — on runc, on Podman, on a derived image; gVisor refuses it
 *    too. The same probe in a scratch container holding DAC_READ_SEARCH under the engine's default
 *    profile opens the host's root (so the probe can tell).
 * 2. A hostile project image (NODE_OPTIONS, LD_PRELOAD, NODE_PATH, ENTRYPOINT, WORKDIR, USER root;
 *    /etc/ld.so.preload) runs no code as the helper, and the helper's environment is Airlock's alone.
 * 3. A project image whose /bin/sh, git, tar, find and inotifywait are its own scripts: Airlock's whole
 *    workspace path (copy-in and baseline, setup's end, the watcher, the live list and diffs, the
 *    checkpoint scan, collect, apply) runs none of them as the helper; the agent's commands do.
 */
import { readFileSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import type Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DockerDriver } from '../../core/sandbox/docker/docker-driver';
import { connectEngine } from '../../core/sandbox/docker/engine';
import { deriveSandboxImage } from '../../core/environment/derived-image';
import type { SandboxLimits } from '../../core/sandbox/driver';
import { SandboxManager, type Sandbox } from '../../core/sandbox/sandbox';
import { killAgentProcesses } from '../../core/runs/setup-end';
import { scanWorkspace } from '../../core/runs/checkpoints';
import { applyResult } from '../../core/workspace/apply';
import { fileDiff, finalPatch, listChanges, watchChanges } from '../../core/workspace/changes';
import { collectResult } from '../../core/workspace/collect';
import { HostRepo } from '../../core/workspace/host-repo';
import { hydrate } from '../../core/workspace/hydrate';
import { snapshotProject } from '../../core/workspace/snapshot';
import { cleanupTemps, gitRepo, tempDir, testGit } from '../support/workspace-fixtures';
import { requirePrerequisite, type PrerequisiteStatus } from '../support/prerequisites';
import { HOSTILE_DOCKERFILE, HOSTILE_TOOLS, HOSTILE_TOOLS_DOCKERFILE, PROBE_DOCKERFILE, parseProbe, preloadDockerfile, probeBinary, testImage } from '../support/host-escape-images';
import { derivedImage } from '../support/environment-images';
import { DERIVED_SANDBOX_VARIANTS, SANDBOX_VARIANTS, sandboxImage, testRunId, type SandboxVariant, testEngine } from './sandbox-support';

const VARIANTS = [...SANDBOX_VARIANTS, ...DERIVED_SANDBOX_VARIANTS];
const available = new Map<string, PrerequisiteStatus>();
for (const v of VARIANTS) available.set(v.name, await requirePrerequisite(v.prerequisite));
const docker = available.get('runc')?.ok ? (await connectEngine(process.env)).docker : undefined;

const LIMITS: SandboxLimits = { memoryBytes: 512 * 1024 ** 2, cpus: 1, pids: 256 };
/** Every file in a sandbox that lives on a host filesystem. */
const HOST_BACKED = ['/etc/hosts', '/etc/hostname', '/etc/resolv.conf', '/workspace', '/airlock'];
const EPERM = 1;
const TEST_LABEL = { 'airlock.test': 'host-escape' };

let probe: Promise<Buffer> | undefined;
/** The probe binary, built once per run (and cached by the engine's layers across runs). */
function probeBytes(): Promise<Buffer> {
  probe ??= testImage('handle-probe', PROBE_DOCKERFILE).then(async (img) => probeBinary((await connectEngine(process.env)).docker, img));
  return probe;
}

/** Runs `cmd` in a throwaway container and returns its stdout (the engine's log, demultiplexed). */
async function runScratch(d: Docker, config: Docker.ContainerCreateOptions): Promise<string> {
  const c = await d.createContainer({ ...config, Labels: TEST_LABEL });
  try {
    await c.start();
    await c.wait();
    const log = (await c.logs({ stdout: true, stderr: false })) as unknown as Buffer;
    // 8-byte frame headers (stream, 0, 0, 0, size): keep the payloads.
    const parts: Buffer[] = [];
    for (let i = 0; i + 8 <= log.length; ) {
      const size = log.readUInt32BE(i + 4);
      parts.push(log.subarray(i + 8, i + 8 + size));
      i += 8 + size;
    }
    return Buffer.concat(parts).toString('utf8');
  } finally {
    await c.remove({ force: true });
  }
}

describe.skipIf(!docker)('the probe can tell: DAC_READ_SEARCH under the engine\'s default profile reaches the host', () => {
  it('opens the root of the filesystem behind /etc/hosts, read-only, and lists something other than the container\'s /', async () => {
    await probeBytes();
    const img = await testImage('handle-probe', PROBE_DOCKERFILE);
    // Only the capability the helper used to hold; nothing is written anywhere.
    const out = await runScratch(docker!, {
      Image: img,
      Cmd: ['sh', '-c', '/probe /etc/hosts; echo ---; ls -a /'],
      HostConfig: { NetworkMode: 'none', CapDrop: ['ALL'], CapAdd: ['DAC_READ_SEARCH'], ReadonlyRootfs: true, AutoRemove: false },
    });
    const [probeOut, own] = out.split('---\n') as [string, string];
    const r = parseProbe(probeOut).get('/etc/hosts');
    expect(r?.handle.opened, probeOut).toBe(true);
    const reached = new Set(r!.handle.names);
    const containerRoot = new Set(own.split('\n').filter(Boolean));
    expect(reached.has('..')).toBe(true);
    expect([...reached].sort()).not.toEqual([...containerRoot].sort());
    // What it reached is the host's: names of this machine's / that the container's / does not have.
    const hostOnly = (await readdir('/')).filter((n) => reached.has(n) && !containerRoot.has(n));
    expect(hostOnly.length, `reached: ${[...reached].join(' ')}`).toBeGreaterThan(0);
  });
});

for (const variant of VARIANTS) handleSuite(variant);

function handleSuite(variant: SandboxVariant): void {
  const gvisor = variant.isolation === 'gvisor';
  describe.skipIf(!available.get(variant.name)?.ok)(`no way back to the host (live): ${variant.name}`, () => {
    let manager: SandboxManager;
    let sandbox: Sandbox;

    beforeAll(async () => {
      const chosen = await variant.engine();
      const driver = new DockerDriver({ env: process.env, isolation: variant.isolation, engine: chosen ?? testEngine() });
      manager = new SandboxManager(driver);
      const image = await (variant.image?.(chosen) ?? sandboxImage(chosen));
      sandbox = await manager.create({ runId: testRunId(), image, limits: LIMITS, network: 'none' });
      await sandbox.channel.writeFile('/tmp/probe', await probeBytes(), { mode: 0o755 });
    });

    afterAll(async () => {
      await manager?.shutdown();
    });

    it(`refuses open_by_handle_at as the helper on every host-backed file${gvisor ? ' (gVisor\'s kernel)' : ', and the profile refuses name_to_handle_at'}`, async () => {
      const r = await sandbox.channel.run({ argv: ['/tmp/probe', ...HOST_BACKED], as: 'helper' });
      const out = r.stdout.toString('utf8');
      const results = parseProbe(out);
      for (const path of HOST_BACKED) {
        const p = results.get(path);
        expect(p, `${path}: ${out}`).toBeDefined();
        expect(p!.handle.opened, `${path}: ${out}`).toBe(false);
        if (!gvisor) {
          // EPERM from the profile: the call never reaches the kernel's capability check.
          expect(p!.handle.errno, path).toBe(EPERM);
          // Needs no capability at all: only Airlock's profile refuses it (the engine default allows it).
          expect(p!.nameToHandle, path).toEqual({ ok: false, errno: EPERM });
        }
      }
    });

    it.runIf(!gvisor)('gives the helper no DAC_READ_SEARCH, and a command as the agent none at all', async () => {
      const helper = await sandbox.channel.run({ argv: ['sh', '-c', 'grep -E "^Cap(Eff|Prm|Bnd):" /proc/self/status'], as: 'helper' });
      // KILL (5), SETGID (6), SETUID (7): 0xe0; DAC_READ_SEARCH (2) would make it 0xe4.
      expect(helper.stdout.toString('utf8')).toMatch(/CapPrm:\s+00000000000000e0\nCapEff:\s+00000000000000e0\nCapBnd:\s+00000000000000e0/);
    });
  });
}

describe.skipIf(!docker)('a hostile project image runs no code as the helper (runc, derived)', () => {
  let manager: SandboxManager;
  let sandbox: Sandbox;
  let hostile: string;

  beforeAll(async () => {
    hostile = await testImage('hostile', HOSTILE_DOCKERFILE);
    const image = await derivedImage(hostile);
    manager = new SandboxManager(new DockerDriver({ env: process.env, engine: testEngine() }));
    sandbox = await manager.create({ runId: testRunId(), image, limits: LIMITS, network: 'none' });
  });

  afterAll(async () => {
    await manager?.shutdown();
  });

  async function helperSh(script: string): Promise<string> {
    const r = await sandbox.channel.run({ argv: ['sh', '-c', script], as: 'helper' });
    return r.stdout.toString('utf8');
  }

  it('starts the helper with Airlock\'s environment only, by Airlock\'s loader and Node, in no hostile folder', async () => {
    // The command's parent is the helper itself.
    const environ = (await helperSh('tr "\\0" "\\n" < /proc/$PPID/environ')).split('\n').filter(Boolean);
    expect(environ.map((e) => e.split('=', 1)[0]).sort()).toEqual(['AIRLOCK_AGENT_USER', 'HOME', 'HOSTNAME', 'LANG', 'PATH']);
    expect(environ.join('\n')).not.toMatch(/hostile|NODE_OPTIONS|LD_PRELOAD|NODE_PATH/);
    const cmdline = (await helperSh('tr "\\0" " " < /proc/$PPID/cmdline')).trim();
    expect(cmdline).toBe('/opt/airlock/lib/ld.so --inhibit-cache --library-path /opt/airlock/lib /opt/airlock/node/node --openssl-config=/dev/null /opt/airlock/helper.js');
    expect((await helperSh('readlink /proc/$PPID/cwd')).trim()).toBe('/workspace');
    // No library of the image is mapped into the helper.
    expect(await helperSh('cat /proc/$PPID/maps')).not.toMatch(/hostile|\/lib\/x86_64-linux-gnu|\/lib\/aarch64-linux-gnu/);
  });

  it('leaves no marker of the image\'s hooks by root, while the same hooks do run for a command that asks for them', async () => {
    // The hooks work: a command that sets the image's variables itself runs them (as the agent).
    const agent = await sandbox.channel.run({ argv: ['sh', '-c', 'LD_PRELOAD=/hostile/hook.so NODE_OPTIONS="--require /hostile/hook.js" /opt/airlock/node/node -e 0; /hostile/entry.sh true'] });
    expect(agent.exitCode).toBe(0);
    const markers = (await helperSh('ls -a /tmp')).split('\n').filter((n) => n.startsWith('hostile-')).sort();
    expect(markers).toEqual(['hostile-entry-1000', 'hostile-node-1000', 'hostile-preload-1000']);
  });

  it('refuses an image with /etc/ld.so.preload: deriving it names the file, and a sandbox of it is never started', async () => {
    const d = docker!;
    const preloaded = await testImage('hostile-preload', preloadDockerfile(hostile));
    const airlockRef = await sandboxImage();
    await expect(deriveSandboxImage(d, { baseRef: preloaded, airlockRef, emit: () => undefined, what: 'the hostile image' })).rejects.toThrow(/\/etc\/ld\.so\.preload/);
    // An image given as it is (no derivation) is refused at create, before anything of it runs.
    const direct = await testImage('airlock-preload', preloadDockerfile(airlockRef));
    const m = new SandboxManager(new DockerDriver({ env: process.env, engine: testEngine() }));
    const runId = testRunId();
    try {
      await expect(m.create({ runId, image: direct, limits: LIMITS, network: 'none' })).rejects.toMatchObject({ kind: 'IMAGE_INCOMPATIBLE', message: expect.stringMatching(/\/etc\/ld\.so\.preload/) });
      const left = await d.listContainers({ all: true, filters: { label: [`airlock.run=${runId}`] } });
      expect(left).toEqual([]);
    } finally {
      await m.shutdown();
    }
  });
});

describe.skipIf(!docker)("a project image's own sh, git, tar, find and inotifywait never run as the helper (runc, derived)", () => {
  let manager: SandboxManager;
  let sandbox: Sandbox;

  beforeAll(async () => {
    const image = await derivedImage(await testImage('hostile-tools', HOSTILE_TOOLS_DOCKERFILE));
    manager = new SandboxManager(new DockerDriver({ env: process.env, engine: testEngine() }));
    sandbox = await manager.create({ runId: testRunId(), image, limits: LIMITS, network: 'none' });
  });

  afterAll(async () => {
    await manager?.shutdown();
    cleanupTemps();
  });

  /** `hostile-<tool>-<uid>` markers in /tmp, listed by the helper's own file operation (no program runs). */
  async function markers(): Promise<string[]> {
    return (await sandbox.channel.list('/tmp')).map((e) => e.name).filter((n) => n.startsWith('hostile-')).sort();
  }

  it('copy-in, setup end, watch, live changes, checkpoint scan, collect and apply: no marker by uid 0, while the agent\'s commands leave theirs', async () => {
    const dir = gitRepo({ 'src/app.ts': 'export const a = 1;\n', 'README.md': '# demo\n' });
    const snapshot = await snapshotProject(testGit, dir);
    const repo = await HostRepo.create(testGit, path.join(tempDir(), 'objects.git'));
    const hydrated = await hydrate(sandbox.channel, snapshot, { hostRepo: repo });
    expect(await listChanges(sandbox.channel)).toEqual([]);
    // Setup's end: every process of the agent's user is gone (none is left here).
    await killAgentProcesses(sandbox.channel);
    expect(await scanWorkspace(sandbox.channel, 'mark', false)).toBe(false);

    let seen: () => void = () => undefined;
    const changed = new Promise<void>((resolve) => (seen = resolve));
    const watch = await watchChanges(sandbox.channel, (paths) => paths.includes('src/app.ts') && seen(), { debounceMs: 20 });
    try {
      // The agent: an edit, and each replaced program used once (the positive control).
      const agent = await sandbox.channel.run({ argv: ['sh', '-c', "printf 'export const a = 2;\\n' > /workspace/src/app.ts && echo new > /workspace/added.txt && git --version && tar --version && find /workspace -maxdepth 0 && (inotifywait --help || true)"] });
      expect(agent.exitCode, agent.stderr.toString('utf8')).toBe(0);
      await changed;
    } finally {
      watch.dispose();
    }

    const live = await listChanges(sandbox.channel);
    expect(live.map((c) => c.path).sort()).toEqual(['added.txt', 'src/app.ts']);
    expect((await fileDiff(sandbox.channel, 'src/app.ts')).diff).toContain('+export const a = 2;');
    expect((await finalPatch(sandbox.channel)).toString('utf8')).toContain('added.txt');
    expect(await scanWorkspace(sandbox.channel, 'scan', false)).toBe(true);
    expect(await scanWorkspace(sandbox.channel, 'scan', false)).toBe(false);

    const { result, patch } = await collectResult(sandbox.channel, { repo, baseCommit: await (hydrated.hostBaseline as Promise<string>), manifest: hydrated.manifest });
    expect(result.changes.map((c) => c.path).sort()).toEqual(['added.txt', 'src/app.ts']);
    const applied = await applyResult({ projectDir: dir, repo, result, patch, reviewedSha256: result.patchSha256, mode: 'working-tree' });
    expect(applied.conflicts).toEqual([]);
    expect(readFileSync(path.join(dir, 'src/app.ts'), 'utf8')).toBe('export const a = 2;\n');

    const found = await markers();
    // The project's programs do run, as the agent (uid 1000): each replaced one left its marker.
    for (const t of HOSTILE_TOOLS) expect(found).toContain(`hostile-${t}-1000`);
    // And none ran as the helper (uid 0).
    expect(found.filter((n) => !n.endsWith('-1000'))).toEqual([]);
  });
});
