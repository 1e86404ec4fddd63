/**
 * Remote engines (docs/architecture.md §13): runs against an engine reached over TLS and over SSH,
 * both started here on loopback in front of the local engine (which is never reconfigured). A
 * built-in agent run completes over each, its result applied and its wipe verified by label through
 * that endpoint; the canary key is found nowhere on the engine side; a link dropped mid-run or
 * during the wipe gives DOCKER_UNREACHABLE and keeps everything already on the host, and the
 * sandbox left behind is wiped once the engine answers again.
 */
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { DockerDriver } from '../../core/sandbox/docker/docker-driver';
import { AirlockError } from '../../contracts/errors';
import { connectEngine, pingEngine, type Engine } from '../../core/sandbox/docker/engine';
import { SandboxManager } from '../../core/sandbox/sandbox';
import { testRunId, testEngine } from './sandbox-support';
import { ensureSandboxImage } from '../../core/sandbox/image';
import { requirePrerequisite } from '../support/prerequisites';
import { startSshEngine, startTlsEngine, type SshEngine, type TlsEngine } from '../support/remote-engines';
import { CANARY_KEY, createRunFixture, filesContaining, treeDigest, type RunFixture } from '../support/run-fixture';
import type { ScriptedTurn } from '../fixtures/fake-upstream';

const docker = await requirePrerequisite('docker');
const sshd = docker.ok ? await requirePrerequisite('sshd') : docker;
const openssl = docker.ok ? await requirePrerequisite('openssl') : docker;

/** Containers and volumes labelled with the run, as the remote engine lists them. */
async function remoteLeftovers(engine: Engine, runId: string): Promise<string[]> {
  const filters = { label: [`airlock.run=${runId}`] };
  const [containers, volumes] = await Promise.all([engine.docker.listContainers({ all: true, filters }), engine.docker.listVolumes({ filters })]);
  return [...containers.map((c) => `container:${c.Id.slice(0, 12)}`), ...(volumes.Volumes ?? []).map((v) => `volume:${v.Name}`)];
}

/** All bytes of a stream. */
async function drain(stream: Readable | NodeJS.ReadableStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream as AsyncIterable<Buffer | string>) chunks.push(typeof c === 'string' ? Buffer.from(c) : c);
  return Buffer.concat(chunks);
}

/** Runs a command in the sandbox as its user, through the remote engine's exec API; returns stdout+stderr as docker multiplexes them. */
async function remoteExec(engine: Engine, containerId: string, cmd: string[]): Promise<Buffer> {
  const exec = await engine.docker.getContainer(containerId).exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true, User: '1000:1000' });
  return drain(await exec.start({ hijack: true, stdin: false }));
}

function waitForOutput(f: RunFixture, runId: string, marker: string): Promise<void> {
  return new Promise((resolve) => {
    const sub = f.core.runs.onDidEvent((e) => {
      if (e.runId === runId && e.event.type === 'command_output' && e.event.data.includes(marker)) {
        sub.dispose();
        resolve();
      }
    });
  });
}

/** Edit, serve the workspace on a preview port, pause until the host has searched the sandbox, add a file, finish. */
const REMOTE_SCRIPT: ScriptedTurn[] = [
  { toolCalls: [{ name: 'edit_file', input: { path: 'src/app.js', old_text: 'return 1;', new_text: 'return 42;' } }] },
  {
    toolCalls: [
      {
        name: 'run_command',
        input: {
          command:
            'setsid -f python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1; for i in $(seq 100); do (echo > /dev/tcp/127.0.0.1/8000) 2>/dev/null && break; sleep 0.2; done; echo remote-ready; until [ -f /tmp/airlock-go ]; do sleep 0.2; done; echo resumed',
        },
      },
    ],
  },
  { toolCalls: [{ name: 'write_file', input: { path: 'docs/NEW.md', content: 'made on a remote engine\n' } }] },
  { toolCalls: [{ name: 'finish', input: { summary: 'Changed the answer to 42 remotely.' } }] },
];

type Endpoint = { name: 'TLS' | 'SSH'; env: Record<string, string>; close(): Promise<void> };

describe.skipIf(!docker.ok || !sshd.ok || !openssl.ok)('remote engines over TLS and SSH (real engine behind loopback endpoints)', () => {
  let tlsEngine: TlsEngine;
  let sshEngine: SshEngine;
  const endpoints: Endpoint[] = [];

  beforeAll(async () => {
    tlsEngine = await startTlsEngine();
    sshEngine = await startSshEngine();
    endpoints.push({ name: 'TLS', env: tlsEngine.env, close: () => tlsEngine.close() }, { name: 'SSH', env: sshEngine.env, close: () => sshEngine.close() });
  }, 60_000);
  afterAll(async () => {
    await tlsEngine?.close();
    await sshEngine?.close();
  });

  for (const name of ['TLS', 'SSH'] as const) {
    it(`a built-in agent run over ${name} completes, is applied, leaves no key on the engine side and is wiped (verified there)`, async () => {
      const endpoint = endpoints.find((e) => e.name === name) as Endpoint;
      const remote = await connectEngine({ ...process.env, ...endpoint.env });
      const f = await createRunFixture({ env: endpoint.env });
      try {
        // The core talks to the endpoint, and knows it is remote.
        const engine = await f.core.engine();
        expect(engine.endpoint.description).toMatchObject({ transport: name === 'TLS' ? 'tls' : 'ssh', remote: true, location: name === 'TLS' ? `127.0.0.1:${tlsEngine.port}` : '127.0.0.1' });
        const report = await f.services.sandboxes.doctor({});
        expect(report.checks.find((c) => c.id === 'docker.engine')?.detail).toContain(`over ${name} at 127.0.0.1`);

        const projectDir = await f.project();
        const before = await treeDigest(projectDir);
        const started = await f.start({ projectDir, script: REMOTE_SCRIPT });
        await waitForOutput(f, started.id, 'remote-ready');

        // The sandbox as the remote engine sees it: labelled with this installation.
        const [container] = await remote.docker.listContainers({ filters: { label: [`airlock.run=${started.id}`] } });
        expect(container).toBeDefined();
        const installation = (await readFile(path.join(f.home, 'installation-id'), 'utf8')).trim();
        expect(container!.Labels['airlock.installation']).toBe(installation);

        // What the engine's operator can see holds no key: the container's config, its processes'
        // environments, every file in its volumes and scratch (positive controls: the run token and the project are there).
        const inspect = JSON.stringify(await remote.docker.getContainer(container!.Id).inspect());
        expect(inspect).toContain('airlock.run');
        expect(inspect).not.toContain(CANARY_KEY);
        // Nothing of this machine is mounted on the engine: its own volumes and tmpfs only.
        const config = await remote.docker.getContainer(container!.Id).inspect();
        expect(config.HostConfig.Binds ?? []).toEqual([]);
        expect(config.Mounts.map((m) => m.Type)).toEqual(['volume', 'volume']);
        const inside = await remoteExec(remote, container!.Id, ['sh', '-c', 'cat /proc/[0-9]*/environ 2>/dev/null; tar cf - /workspace /airlock /tmp /home/airlock 2>/dev/null']);
        expect(inside.includes('airlock-run-')).toBe(true);
        expect(inside.includes('export function answer')).toBe(true);
        expect(inside.includes(CANARY_KEY)).toBe(false);
        const workspace = await drain(await remote.docker.getContainer(container!.Id).getArchive({ path: '/workspace' }));
        expect(workspace.includes('return 42;')).toBe(true);
        expect(workspace.includes(CANARY_KEY)).toBe(false);
        const volumes = await remote.docker.listVolumes({ filters: { label: [`airlock.run=${started.id}`] } });
        expect(volumes.Volumes ?? []).toHaveLength(2);
        expect(JSON.stringify(volumes)).not.toContain(CANARY_KEY);

        // A preview port crosses the channel, like the model proxy: nothing is published on the engine.
        const published = await f.core.runs.publishPort(started.id, 8000);
        expect(published.url).toMatch(/^http:\/\/localhost:\d+\/$/);
        expect(await (await fetch(`${published.url}src/app.js`)).text()).toContain('return 42;');
        expect((await remote.docker.getContainer(container!.Id).inspect()).NetworkSettings.Ports ?? {}).toEqual({});

        await remoteExec(remote, container!.Id, ['touch', '/tmp/airlock-go']);
        const run = await f.core.runs.wait(started.id);
        expect(run.error).toBeUndefined();
        expect(run.status).toBe('done');
        expect(await treeDigest(projectDir)).toBe(before);
        expect(run.changedFiles.map((c) => `${c.status} ${c.path}`).sort()).toEqual(['added docs/NEW.md', 'modified src/app.js']);
        expect(await f.terminalLog(run.id)).toContain('resumed');

        // Wiped, and verified gone by label through the same endpoint.
        expect(run.wipe?.verified).toBe(true);
        expect(await remoteLeftovers(remote, run.id)).toEqual([]);
        const { records } = await f.services.audit.read({ runId: run.id, offset: 0, limit: 1000 });
        expect(records.find((r) => r.type === 'wipe')?.data.verified).toBe(true);
        // The record and the audit log say where the project copy went.
        expect(run.sandbox.engine).toContain(`over ${name} at 127.0.0.1`);
        expect(records.some((r) => r.type === 'note' && String(r.data.message).startsWith('sandbox on a remote engine: Docker'))).toBe(true);

        // The upstream saw the real key (it stayed on this machine); nothing Airlock wrote holds it.
        expect(f.upstream.requests.some((r) => r.headers['x-api-key'] === CANARY_KEY)).toBe(true);
        expect(await filesContaining(f.core.store.paths(run.id).dir, CANARY_KEY)).toEqual([]);

        // Applied to the project.
        const applied = await f.services.diffs.apply({ runId: run.id, mode: 'working-tree', reviewedSha256: (await f.services.diffs.list({ runId: run.id })).patchSha256 as string });
        expect(applied.applied.sort()).toEqual(['docs/NEW.md', 'src/app.js']);
        expect(await readFile(path.join(projectDir, 'src/app.js'), 'utf8')).toContain('return 42;');
      } finally {
        await f.close();
        remote.dispose();
      }
    }, 300_000);
  }

  it('an engine address refused as unsafe (plain TCP to another host) does not stop Airlock: the doctor and a run say why and what to do', async () => {
    // Refused before any connection is tried: `.invalid` names never resolve anyway.
    const f = await createRunFixture({ env: { DOCKER_HOST: 'tcp://build-box.invalid:2375' } });
    try {
      const engineCheck = (await f.services.sandboxes.doctor({})).checks.find((c) => c.id === 'docker.engine');
      expect(engineCheck?.status).toBe('fail');
      expect(engineCheck?.detail).toMatch(/plain, unencrypted TCP.*ssh:\/\/user@build-box\.invalid/);
      // The setup check's own provider test may call the model; the run must not.
      const beforeRun = f.upstream.requests.length;
      const started = await f.start({ projectDir: await f.project(), script: [{ toolCalls: [{ name: 'finish', input: { summary: 'never reached' } }] }] });
      const run = await f.core.runs.wait(started.id);
      expect(run.status).toBe('failed');
      expect(run.error?.kind).toBe('INVALID_INPUT');
      expect(run.error?.message).toMatch(/engineAllowInsecure/);
      expect(f.upstream.requests).toHaveLength(beforeRun);
    } finally {
      await f.close();
    }
  }, 120_000);

  it('an SSH host whose key ssh does not know is refused at once, with how to accept it', async () => {
    const env = { ...process.env, ...sshEngine.unknownHostEnv };
    const engine = await connectEngine(env);
    try {
      const err = await pingEngine(engine, env).then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(AirlockError);
      expect((err as AirlockError).kind).toBe('DOCKER_UNREACHABLE');
      expect((err as AirlockError).message).toMatch(/host key.*ssh 127\.0\.0\.1/);
    } finally {
      engine.dispose();
    }
  }, 60_000);

  it('builds the sandbox image over TLS: the build context is streamed through the API', async () => {
    const remote = await connectEngine({ ...process.env, ...tlsEngine.env });
    try {
      const progress: string[] = [];
      const r = await ensureSandboxImage({ env: process.env, engine: remote, force: true, onProgress: (p) => progress.push(p.phase) });
      expect(r.built).toBe(true);
      expect(progress).toContain('build');
      expect((await remote.docker.getImage(r.ref).inspect()).RepoTags).toContain(r.ref);
    } finally {
      remote.dispose();
    }
  }, 600_000);

  describe('a dropped link', () => {
    let f: RunFixture;
    let remote: Engine;
    beforeAll(async () => {
      f = await createRunFixture({ env: tlsEngine.env });
      remote = await connectEngine({ ...process.env, ...tlsEngine.env });
    });
    afterAll(async () => {
      await f?.close();
      remote?.dispose();
    });

    it('mid-run: the run fails with DOCKER_UNREACHABLE saying where, keeps its log and audit, and the sandbox is wiped once the engine answers', async () => {
      const projectDir = await f.project();
      const started = await f.start({
        projectDir,
        script: [
          { toolCalls: [{ name: 'write_file', input: { path: 'partial.txt', content: 'work in progress\n' } }] },
          { toolCalls: [{ name: 'run_command', input: { command: 'echo link-drop-ready; sleep 300' } }] },
          { toolCalls: [{ name: 'finish', input: { summary: 'never reached' } }] },
        ],
      });
      await waitForOutput(f, started.id, 'link-drop-ready');
      tlsEngine.kill();
      const run = await f.core.runs.wait(started.id);
      expect(run.status).toBe('failed');
      expect(run.error?.kind).toBe('DOCKER_UNREACHABLE');
      expect(run.error?.message).toContain(`over TLS at 127.0.0.1:${tlsEngine.port}`);
      expect(run.error?.message).toMatch(/remote wipe could not be verified/);
      expect(run.wipe?.verified).toBe(false);
      // What the host already had is kept: the command's output, the events, an intact audit log.
      expect(await f.terminalLog(run.id)).toContain('link-drop-ready');
      expect((await f.services.audit.verify({ runId: run.id })).intact).toBe(true);

      await tlsEngine.restore();
      expect((await remoteLeftovers(remote, run.id)).length).toBeGreaterThan(0);
      const manager = await f.core.sandboxes('container');
      expect(manager.pendingWipes()).toContain(run.id);
      // The next run on this engine retries the wipe first.
      const next = await f.start({ projectDir: await f.project(), script: [{ toolCalls: [{ name: 'finish', input: { summary: 'ok' } }] }] });
      expect((await f.core.runs.wait(next.id)).status).toBe('done');
      await vi.waitFor(async () => expect(await remoteLeftovers(remote, run.id)).toEqual([]), { timeout: 60_000, interval: 500 });
      expect(manager.pendingWipes()).not.toContain(run.id);
    }, 300_000);

    it('during the wipe: the collected result is kept on the host, the wipe is reported unverified, and the reaper removes it later', async () => {
      const projectDir = await f.project();
      const started = await f.start({
        projectDir,
        script: [
          { toolCalls: [{ name: 'write_file', input: { path: 'kept.txt', content: 'collected before the link dropped\n' } }] },
          { toolCalls: [{ name: 'finish', input: { summary: 'done' } }] },
        ],
      });
      const sub = f.core.runs.onDidEvent((e) => {
        if (e.runId === started.id && e.event.type === 'status' && e.event.status === 'wiping') {
          sub.dispose();
          tlsEngine.kill();
        }
      });
      const run = await f.core.runs.wait(started.id);
      expect(run.error?.kind).toBe('DOCKER_UNREACHABLE');
      expect(run.error?.message).toMatch(/remote wipe could not be verified/);
      expect(run.wipe?.verified).toBe(false);
      expect(run.changedFiles.map((c) => c.path)).toEqual(['kept.txt']);
      expect(await readFile(f.core.store.paths(run.id).patch, 'utf8')).toContain('+collected before the link dropped');

      await tlsEngine.restore();
      // Only this installation's sandboxes are the reaper's on a network engine; this one is.
      const manager = await f.core.sandboxes('container');
      expect(await manager.reapOrphans(() => false)).toContain(run.id);
      expect(await remoteLeftovers(remote, run.id)).toEqual([]);
      // The result is still there to review and apply.
      const applied = await f.services.diffs.apply({ runId: run.id, mode: 'working-tree', reviewedSha256: (await f.services.diffs.list({ runId: run.id })).patchSha256 as string });
      expect(applied.applied).toEqual(['kept.txt']);
    }, 300_000);

    it("on a shared engine the reaper takes only its own installation's leftovers, whatever host name and pid say", async () => {
      // A pid that surely is gone: a child that has exited.
      const child = spawn('true');
      await new Promise((resolve) => child.on('exit', resolve));
      const deadHere = `${hostname()}:${child.pid}`;
      const ours = (await readFile(path.join(f.home, 'installation-id'), 'utf8')).trim();
      const volume = (runId: string, labels: Record<string, string>) => remote.docker.createVolume({ Name: `airlock-${runId}-workspace`, Labels: { 'airlock.run': runId, 'airlock.kind': 'volume', ...labels } });
      const [mine, otherInstallation, unlabelled] = [testRunId(), testRunId(), testRunId()];
      await volume(mine, { 'airlock.owner': 'another-host:1', 'airlock.installation': ours });
      // Another user's machine may share this host name; its pid means nothing here.
      await volume(otherInstallation, { 'airlock.owner': deadHere, 'airlock.installation': 'f'.repeat(32) });
      await volume(unlabelled, { 'airlock.owner': deadHere });
      const mineOnly = (runId: string) => ![mine, otherInstallation, unlabelled].includes(runId);
      try {
        const manager = await f.core.sandboxes('container');
        const reaped = await manager.reapOrphans(mineOnly);
        expect(reaped).toEqual([mine]);
        expect(await remoteLeftovers(remote, otherInstallation)).toHaveLength(1);
        expect(await remoteLeftovers(remote, unlabelled)).toHaveLength(1);
        // The same engine through its local socket is not shared: a process of this host that is gone is judged by its pid.
        const local = new SandboxManager(new DockerDriver({ env: process.env, engine: testEngine() }));
        expect((await local.reapOrphans(mineOnly)).sort()).toEqual([otherInstallation, unlabelled].sort());
      } finally {
        for (const runId of [mine, otherInstallation, unlabelled]) await remote.docker.getVolume(`airlock-${runId}-workspace`).remove().catch(() => undefined);
      }
    }, 120_000);
  });
});
