/**
 * docs/architecture.md §16, "No DNS leaves a compose run's network", tried on this machine's Docker
 * (20.10, before the CVE-2024-29018 fix) without touching the shared engine or any address outside.
 *
 * The test starts a second dockerd of the same version in mount and network namespaces it makes
 * (`unshare --mount --net`): there `/etc/resolv.conf` names 127.0.0.1, where a recording DNS server
 * (this Node, in the same namespace) prints every name it is asked. The namespace has only its own
 * loopback and the bridges that engine makes, so nothing can leave it. On that engine:
 * - Airlock's run network and a sidecar as the compose path makes them (`createSidecarNetwork`,
 *   `startSidecars`): the sidecar's lookup of an outside name reaches no resolver, and service names
 *   are still answered;
 * - controls: a plain container on the same internal network (the engine's default DNS) and one on a
 *   network with a route out both reach the recorder, so the engine does forward, and the test can fail.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readdir, rm, rmdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSidecarNetwork, removeSidecars, sidecarContainerName, startSidecars } from '../../core/environment/compose-sidecars';
import { connectEngine } from '../../core/sandbox/docker/engine';
import { requirePrerequisite } from '../support/prerequisites';
import { testRunId } from './sandbox-support';

const ready = (await requirePrerequisite('docker')).ok && (await requirePrerequisite('private-dockerd')).ok;
const IMAGE = 'debian:bookworm-slim';

/** Prints `query <name>` for every DNS question it receives on 127.0.0.1:53 (and answers nothing). */
const RECORDER = `
const s = require('dgram').createSocket('udp4');
s.on('message', (m) => {
  const labels = []; let i = 12;
  while (i < m.length && m[i] > 0 && m[i] < 64) { labels.push(m.subarray(i + 1, i + 1 + m[i]).toString('latin1')); i += 1 + m[i]; }
  process.stdout.write('query ' + labels.join('.') + '\\n');
});
s.bind(53, '127.0.0.1', () => process.stdout.write('recorder ready ' + process.pid + '\\n'));
`;

interface PrivateEngine {
  docker: Docker;
  /** Resolves once the recorder has printed a query for `name`; `names()` is every name so far, in order. */
  asked(name: string): Promise<void>;
  names(): string[];
  stop(): Promise<void>;
}

/** A dockerd and the recorder in namespaces of their own; the base image loaded from the shared engine. */
async function startPrivateEngine(): Promise<PrivateEngine> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-dns-'));
  await writeFile(path.join(dir, 'resolv.conf'), 'nameserver 127.0.0.1\n');
  await writeFile(path.join(dir, 'recorder.js'), RECORDER);
  const socket = path.join(dir, 'docker.sock');
  const cgroupParent = `airlock-${path.basename(dir)}`;
  const script = [
    'set -e',
    `mount --bind ${dir}/resolv.conf /etc/resolv.conf`,
    'ip link set lo up',
    `"${process.execPath}" ${dir}/recorder.js &`,
    `exec dockerd --data-root ${dir}/data --exec-root ${dir}/exec -H unix://${socket} --pidfile ${dir}/dockerd.pid --cgroup-parent /${cgroupParent} --bridge none --shutdown-timeout 1 >${dir}/dockerd.log 2>&1`,
  ].join('\n');
  const child: ChildProcess = spawn('unshare', ['--mount', '--net', '--propagation', 'private', 'sh', '-c', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const lines: string[] = [];
  const waiters: Array<() => void> = [];
  let buf = '';
  (child.stdout as Readable).setEncoding('utf8').on('data', (t: string) => {
    buf += t;
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      lines.push(buf.slice(0, nl));
      buf = buf.slice(nl + 1);
    }
    for (const w of waiters.splice(0)) w();
  });
  const until = (test: () => boolean) =>
    new Promise<void>((resolve, reject) => {
      const check = () => {
        if (test()) resolve();
        else if (child.exitCode !== null) reject(new Error(`the private engine exited (${child.exitCode}); see ${dir}/dockerd.log`));
        else waiters.push(check);
      };
      check();
    });
  const docker = new Docker({ socketPath: socket });
  const stop = async () => {
    // `unshare` and `sh` exec'd dockerd: the child is dockerd itself; the recorder is its own process.
    const recorder = Number(lines.find((l) => l.startsWith('recorder ready '))?.split(' ')[2]);
    if (recorder) process.kill(recorder, 'SIGTERM');
    if (child.exitCode === null) child.kill('SIGTERM');
    await exited;
    await rm(dir, { recursive: true, force: true }).catch(() => undefined);
    // The engine leaves its (empty) parent cgroup in each controller.
    for (const c of await readdir('/sys/fs/cgroup').catch(() => [] as string[])) await rmdir(path.join('/sys/fs/cgroup', c, cgroupParent)).catch(() => undefined);
  };
  try {
    await until(() => lines.some((l) => l.startsWith('recorder ready ')));
    // dockerd answers once its API is up; each try waits for the answer, not for a clock.
    for (;;) {
      if (child.exitCode !== null) throw new Error(`the private engine exited; see ${dir}/dockerd.log`);
      if (await docker.ping().then(() => true, () => false)) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const shared = (await connectEngine(process.env)).docker;
    await docker.loadImage((await shared.getImage(IMAGE).get()) as unknown as Readable).then((s) => new Promise((r, j) => docker.modem.followProgress(s as unknown as Readable, (e) => (e ? j(e) : r(undefined)))));
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    docker,
    asked: (name) => until(() => lines.includes(`query ${name}`)),
    names: () => lines.filter((l) => l.startsWith('query ')).map((l) => l.slice(6)),
    stop,
  };
}

/** Runs `getent hosts <name>` in a throwaway container on `network` and waits for it to end. */
async function lookUp(docker: Docker, network: string, name: string): Promise<void> {
  // No DNS setting at all: with any (even DnsOptions) Docker 20.10 drops a loopback host resolver and
  // falls back to its public defaults, which this control must never be pointed at.
  const c = await docker.createContainer({ Image: IMAGE, Cmd: ['getent', 'hosts', name], HostConfig: { NetworkMode: network } });
  try {
    await c.start();
    await c.wait();
  } finally {
    await c.remove({ force: true });
  }
}

describe.skipIf(!ready)("a compose run's outside lookups reach no resolver (Docker 20.10, a private engine whose host resolver is on loopback)", () => {
  let engine: PrivateEngine;

  beforeAll(async () => {
    engine = await startPrivateEngine();
  }, 180_000);

  afterAll(async () => {
    await engine?.stop();
  });

  it('a sidecar on the run network: its outside lookup is never forwarded, service names still answer; the engine itself does forward', async () => {
    const { docker } = engine;
    const runId = testRunId();
    const network = await createSidecarNetwork(docker, runId, ['db'], { engine: 'docker' });
    try {
      expect(network.dns?.servers).toHaveLength(1);
      await startSidecars(docker, runId, [{ service: { name: 'db', source: { kind: 'image', image: IMAGE }, environment: {}, command: ['sh', '-c', 'timeout 10 getent hosts outside-sidecar.example || echo unresolved; timeout 10 getent hosts db >/dev/null && echo named; echo done; exec sleep 600'], tmpfs: [], writableRoot: false }, image: IMAGE, imageVolumes: [] }], { engine: 'docker', network });
      const logs = (await docker.getContainer(sidecarContainerName(runId, 'db')).logs({ follow: true, stdout: true, stderr: true })) as unknown as Readable;
      let text = '';
      await new Promise<void>((resolve, reject) => {
        logs.on('data', (c: Buffer) => {
          text += c.toString('latin1');
          if (text.includes('done')) resolve();
        });
        logs.on('error', reject);
        logs.on('end', () => (text.includes('done') ? resolve() : reject(new Error(`the sidecar ended: ${text}`))));
      });
      logs.destroy();
      expect(text).toContain('unresolved');
      expect(text).toContain('named');

      // Control 1: the same internal network with the engine's own DNS settings: forwarded (CVE-2024-29018).
      await lookUp(docker, network.name, 'outside-internal.example');
      await engine.asked('outside-internal.example');
      // The recorder prints in arrival order: nothing of the sidecar's came before the control's.
      expect(engine.names().filter((n) => n.includes('sidecar'))).toEqual([]);

      // Control 2: a network with a route out (in this namespace only).
      const open = await docker.createNetwork({ Name: `airlock-dns-open-${runId}` });
      try {
        await lookUp(docker, `airlock-dns-open-${runId}`, 'outside-open.example');
        await engine.asked('outside-open.example');
      } finally {
        await open.remove();
      }
      expect(engine.names().filter((n) => n.includes('sidecar'))).toEqual([]);
    } finally {
      await removeSidecars(docker, runId);
      await docker.getNetwork(network.name).remove().catch(() => undefined);
    }
  });
});
