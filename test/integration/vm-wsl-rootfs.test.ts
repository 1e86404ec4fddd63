/**
 * The WSL2 driver's root filesystem, made for real from a Docker image (the seeded Debian image keeps
 * it small): every file of the image plus /etc/wsl.conf and the busybox. `wsl --import` of it is NOT
 * exercised here (no Windows); see resources/vm/README.md.
 */
import { createReadStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { extract } from 'tar-stream';
import { afterAll, describe, expect, it } from 'vitest';
import { exportWslRootfs, WSL_CONF, WSL_DISTRIBUTION_CONF, WSL_HOSTS } from '../../core/sandbox/wsl/wsl-rootfs';
import { requirePrerequisite } from '../support/prerequisites';
import { testEngine } from './sandbox-support';

const docker = await requirePrerequisite('docker');

describe.skipIf(!docker.ok)('exportWslRootfs', () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  it('exports the image with wsl.conf (automount and interop off) and the busybox added', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-wsl-rootfs-'));
    dirs.push(dir);
    const out = path.join(dir, 'rootfs.tar');
    await exportWslRootfs('debian:bookworm-slim', out, await testEngine(), { busybox: Buffer.from('busybox stand-in') });
    const seen = new Map<string, string>();
    const owners = new Map<string, { uid?: number; mode?: number; type?: string }>();
    const ex = extract();
    ex.on('entry', (h, stream, next) => {
      owners.set(h.name.replace(/^\.?\//, ''), { uid: h.uid, mode: h.mode, type: h.type });
      const chunks: Buffer[] = [];
      stream.on('data', (c: unknown) => chunks.push(c as Buffer));
      stream.on('end', () => {
        seen.set(h.name.replace(/^\.?\//, ''), /(wsl\.conf|wsl-distribution\.conf|passwd|hosts)$/.test(h.name) ? Buffer.concat(chunks).toString('utf8') : '');
        next();
      });
    });
    await new Promise<void>((resolve, reject) => {
      ex.on('finish', resolve);
      ex.on('error', reject);
      createReadStream(out).pipe(ex);
    });
    expect(seen.get('etc/wsl.conf')).toBe(WSL_CONF);
    // docker export's /etc/hosts is empty; the distribution's names localhost.
    expect(seen.get('etc/hosts')).toBe(WSL_HOSTS);
    expect(seen.get('etc/wsl-distribution.conf')).toBe(WSL_DISTRIBUTION_CONF);
    expect(seen.get('etc/passwd')).toMatch(/^root:x:0:0:/);
    expect(seen.has('opt/airlock-vm/busybox')).toBe(true);
    // Airlock's state directory is root's and closed to the agent's user, added where the image has none.
    expect(owners.get('airlock/')).toEqual({ uid: 0, mode: 0o755, type: 'directory' });
    expect(seen.size).toBeGreaterThan(1000);
  });
});
