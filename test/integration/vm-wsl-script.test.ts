/**
 * The WSL2 driver's in-distribution start script, run for real on Linux: a container of the Airlock
 * image stands in for the imported distribution (root inside, as `wsl.exe --user root` gives), and
 * the script must give the helper a private network namespace with only `lo`, keep it uid 0 with
 * only its three capabilities while every command runs as uid 1000 with none (the helper split of
 * docs/architecture.md §2.3), and speak the channel over stdio. wsl.exe itself is NOT exercised here
 * (no Windows); see resources/vm/README.md.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChannelClient } from '../../core/channel/channel-client';
import { ensureSandboxImage } from '../../core/sandbox/image';
import { spawnChannelStream } from '../../core/sandbox/qemu/child-channel';
import { runTool } from '../../core/common/run-tool';
import { wslHelperScript } from '../../core/sandbox/wsl/wsl-cli';
import type { ChannelStream } from '../../core/sandbox/driver';
import { requirePrerequisite } from '../support/prerequisites';
import { testEngine } from './sandbox-support';

const docker = await requirePrerequisite('docker');

describe.skipIf(!docker.ok)('WSL start script (Linux container standing in for the distribution)', () => {
  const name = `airlock-wsl-script-${randomBytes(4).toString('hex')}`;
  let stream: ChannelStream;
  let channel: ChannelClient;
  let share: string;

  beforeAll(async () => {
    const { ref } = await ensureSandboxImage({ env: process.env, engine: testEngine() });
    // Nothing added to the image: the app imports its files as they are (plus /etc files), so `ip` must be its own.
    // What WSL mounts into every distribution (/mnt/wsl, shared by all of them), with something another distribution left there.
    share = await mkdtemp(path.join(os.tmpdir(), 'airlock-wsl-share-'));
    await writeFile(path.join(share, 'left-by-another-distro'), 'secret');
    const script = wslHelperScript({ uid: 1000, gid: 1000, home: '/home/airlock', pids: 256 });
    // Root with the capabilities root has in a WSL distribution that the script uses (namespaces and lo setup; the
    // helper's three are in Docker's default set).
    stream = spawnChannelStream('docker', [
      // The default bridge network: the container has eth0, which the script's namespace must hide.
      'run', '--rm', '-i', '--name', name, '--user', 'root',
      '--cap-add', 'SYS_ADMIN', '--cap-add', 'NET_ADMIN', '--security-opt', 'seccomp=unconfined', '--security-opt', 'apparmor=unconfined',
      '-v', `${share}:/mnt/wsl`, '--label', 'airlock.test=wsl-script',
      ref, '/bin/sh', '-c', script,
    ], { env: process.env });
    channel = await ChannelClient.connect(stream, { helloTimeoutMs: 60_000 });
  });

  afterAll(async () => {
    channel?.dispose();
    stream?.close();
    await runTool('docker', ['rm', '-f', name], { env: process.env, timeoutMs: 30_000 });
    if (share) await rm(share, { recursive: true, force: true });
  });

  it('hides what every WSL distribution shares (/mnt/wsl) in the helper’s own mount namespace', async () => {
    const r = await channel.run({ argv: ['sh', '-c', 'ls -A /mnt/wsl; grep " /mnt/wsl " /proc/self/mountinfo; touch /mnt/wsl/x 2>&1 || echo refused'] });
    expect(r.stdout.toString()).not.toContain('left-by-another-distro');
    expect(r.stdout.toString()).toMatch(/ \/mnt\/wsl ro,.* - tmpfs airlock-masked/);
    expect(r.stdout.toString()).toContain('refused');
  });

  it('keeps the helper uid 0 with only SETUID, SETGID and KILL, and runs commands as uid 1000 with none', async () => {
    // CAP_KILL (5), CAP_SETGID (6), CAP_SETUID (7): 0xe0, as under Docker and in the VM (never DAC_READ_SEARCH, 0x4).
    const THREE = '00000000000000e0';
    const NONE = '0000000000000000';
    expect(channel.hello.uid).toBe(0);
    expect(channel.hello.agentUid).toBe(1000);
    const fields = (text: string) => Object.fromEntries(text.trim().split('\n').map((l) => l.split(':\t').map((v) => v.trim()) as [string, string]));
    // /proc/<pid>/status is world-readable: the command reads the helper's from outside it.
    const helper = await channel.run({ argv: ['grep', '-E', '^(Uid|Gid|Groups|NoNewPrivs|CapInh|CapPrm|CapEff|CapBnd|CapAmb):', `/proc/${channel.hello.pid}/status`] });
    expect(fields(helper.stdout.toString())).toEqual({ Uid: '0\t0\t0\t0', Gid: '0\t0\t0\t0', Groups: '', NoNewPrivs: '1', CapInh: NONE, CapPrm: THREE, CapEff: THREE, CapBnd: THREE, CapAmb: NONE });
    const command = await channel.run({ argv: ['grep', '-E', '^(Uid|Gid|Groups|NoNewPrivs|CapInh|CapPrm|CapEff|CapBnd|CapAmb):', '/proc/self/status'] });
    // The bounding set stays the helper's (nothing between fork and exec clears it); no_new_privs keeps it unreachable (§2.3).
    expect(fields(command.stdout.toString())).toEqual({ Uid: '1000\t1000\t1000\t1000', Gid: '1000\t1000\t1000\t1000', Groups: '', NoNewPrivs: '1', CapInh: NONE, CapPrm: NONE, CapEff: NONE, CapBnd: THREE, CapAmb: NONE });
    // AIRLOCK_AGENT_USER was the helper's alone.
    expect((await channel.run({ argv: ['env'] })).stdout.toString()).not.toContain('AIRLOCK_AGENT_USER');
  });

  it('keeps the helper and /airlock out of the agent’s reach', async () => {
    const r = await channel.run({
      argv: ['sh', '-c', `kill -STOP ${channel.hello.pid} 2>/dev/null && echo stopped; kill -0 ${channel.hello.pid} 2>/dev/null && echo signalled; head -c1 /proc/${channel.hello.pid}/mem 2>/dev/null && echo read-mem; touch /airlock/planted 2>/dev/null && echo wrote; stat -c '%u %a' /airlock`],
    });
    expect(r.stdout.toString().trim()).toBe('0 755');
    // The channel still answers after the attempts.
    expect((await channel.run({ argv: ['true'] })).exitCode).toBe(0);
  });

  it('gives the helper its own network namespace with only lo, up', async () => {
    const ifaces = (text: string) => text.split('\n').slice(2).map((l) => l.split(':')[0]?.trim()).filter(Boolean);
    // /proc/net follows the reader's network namespace (/sys/class/net would show the container's).
    expect(ifaces((await channel.readFile('/proc/net/dev')).toString())).toEqual(['lo']);
    expect((await channel.readFile('/proc/net/route')).toString().trim().split('\n')).toHaveLength(1); // header only
    // lo is up: a closed loopback port refuses (a down lo gives ENETUNREACH).
    const lo = await channel.run({ argv: ['node', '-e', "require('net').connect(1,'127.0.0.1').on('error',e=>console.log(e.code))"] });
    expect(lo.stdout.toString().trim()).toBe('ECONNREFUSED');
    // Outside the namespace, the stand-in distribution does have a network card (an address on the bridge).
    const outside = await runTool('docker', ['inspect', '-f', '{{.NetworkSettings.IPAddress}}', name], { env: process.env, timeoutMs: 30_000 });
    expect(outside.stdout.toString().trim()).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
  });

  it('limits processes for the sandbox user', async () => {
    const limits = (await channel.readFile('/proc/self/limits')).toString();
    expect(limits).toMatch(/Max processes\s+256\s+256\s+processes/);
    // The commands inherit it, and as uid 1000 (not root, whom the kernel exempts) it counts.
    expect((await channel.run({ argv: ['grep', 'Max processes', '/proc/self/limits'] })).stdout.toString()).toMatch(/Max processes\s+256\s+256\s+processes/);
  });
});
