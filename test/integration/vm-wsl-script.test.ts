/**
 * The WSL2 driver's in-distribution start script, run for real on Linux: a container of the Airlock
 * image stands in for the imported distribution (root inside, as `wsl.exe --user root` gives), and
 * the script must give the helper a private network namespace with only `lo`, drop to uid 1000
 * with no capabilities, and speak the channel over stdio. wsl.exe itself is NOT exercised here
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

const docker = await requirePrerequisite('docker');

describe.skipIf(!docker.ok)('WSL start script (Linux container standing in for the distribution)', () => {
  const name = `airlock-wsl-script-${randomBytes(4).toString('hex')}`;
  let stream: ChannelStream;
  let channel: ChannelClient;
  let share: string;

  beforeAll(async () => {
    const { ref } = await ensureSandboxImage();
    // Nothing added to the image: the app imports its files as they are (plus /etc files), so `ip` must be its own.
    // What WSL mounts into every distribution (/mnt/wsl, shared by all of them), with something another distribution left there.
    share = await mkdtemp(path.join(os.tmpdir(), 'airlock-wsl-share-'));
    await writeFile(path.join(share, 'left-by-another-distro'), 'secret');
    const script = wslHelperScript({ uid: 1000, gid: 1000, home: '/home/airlock', pids: 256 });
    // Root with the capabilities root has in a WSL distribution (network namespace and lo setup).
    stream = spawnChannelStream('docker', [
      // The default bridge network: the container has eth0, which the script's namespace must hide.
      'run', '--rm', '-i', '--name', name, '--user', 'root',
      '--cap-add', 'SYS_ADMIN', '--cap-add', 'NET_ADMIN', '--security-opt', 'seccomp=unconfined', '--security-opt', 'apparmor=unconfined',
      '-v', `${share}:/mnt/wsl`, '--label', 'airlock.test=wsl-script',
      ref, '/bin/sh', '-c', script,
    ]);
    channel = await ChannelClient.connect(stream, { helloTimeoutMs: 60_000 });
  });

  afterAll(async () => {
    channel?.dispose();
    stream?.close();
    await runTool('docker', ['rm', '-f', name], { timeoutMs: 30_000 });
    if (share) await rm(share, { recursive: true, force: true });
  });

  it('hides what every WSL distribution shares (/mnt/wsl) in the helper’s own mount namespace', async () => {
    const r = await channel.run({ argv: ['sh', '-c', 'ls -A /mnt/wsl; grep " /mnt/wsl " /proc/self/mountinfo; touch /mnt/wsl/x 2>&1 || echo refused'] });
    expect(r.stdout.toString()).not.toContain('left-by-another-distro');
    expect(r.stdout.toString()).toMatch(/ \/mnt\/wsl ro,.* - tmpfs airlock-masked/);
    expect(r.stdout.toString()).toContain('refused');
  });

  it('runs the helper as uid 1000 with no capabilities and no_new_privs', async () => {
    expect(channel.hello.uid).toBe(1000);
    const r = await channel.run({ argv: ['sh', '-c', 'grep -E "^(NoNewPrivs|CapEff|CapBnd)" /proc/self/status'] });
    expect(r.stdout.toString()).toMatch(/NoNewPrivs:\s+1/);
    expect(r.stdout.toString()).toMatch(/CapEff:\s+0+\n/);
    expect(r.stdout.toString()).toMatch(/CapBnd:\s+0+\n/);
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
    const outside = await runTool('docker', ['inspect', '-f', '{{.NetworkSettings.IPAddress}}', name], { timeoutMs: 30_000 });
    expect(outside.stdout.toString().trim()).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
  });

  it('limits processes for the sandbox user', async () => {
    const limits = (await channel.readFile('/proc/self/limits')).toString();
    expect(limits).toMatch(/Max processes\s+256\s+256\s+processes/);
  });
});
