import { createWriteStream } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import { extract, pack, type Header } from 'tar-stream';
import { withImageFilesystem } from '../docker/image-export';

/**
 * /etc/wsl.conf of every Airlock distribution: no Windows drives (automount off, no fstab), no
 * Windows interop (cannot start .exe files, no Windows PATH), no generated hosts/resolv.conf from the
 * Windows host, no systemd, the image's non-root user by default.
 */
export const WSL_CONF = `# Airlock sandbox distribution: nothing of Windows is reachable from here.
[automount]
enabled = false
mountFsTab = false

[interop]
enabled = false
appendWindowsPath = false

[network]
generateHosts = false
generateResolvConf = false
hostname = airlock

[boot]
systemd = false

[user]
default = airlock
`;

export interface WslRootfsOptions {
  /** A static Linux busybox, installed as /opt/airlock-vm/busybox (brings up `lo` in the run's namespace). */
  busybox?: Buffer;
  /** Replaces WSL_CONF. */
  wslConf?: string;
}

const REPLACED = new Set(['etc/wsl.conf', 'opt/airlock-vm/busybox']);

function normalize(name: string): string {
  return name.replace(/^\.?\/+/, '').replace(/\/+$/, '');
}

/**
 * Turns the image's root filesystem tar (`docker export`) into the tar `wsl --import` takes: every
 * entry copied unchanged (owners, modes, links), /etc/wsl.conf and the busybox added. Streams: the
 * image is never held in memory.
 */
export async function prepareWslRootfs(input: NodeJS.ReadableStream, output: NodeJS.WritableStream, opts: WslRootfsOptions = {}): Promise<void> {
  const ex = extract();
  const out = pack();
  ex.on('entry', (header: Header, stream, next) => {
    if (REPLACED.has(normalize(header.name))) {
      stream.on('end', next);
      stream.resume();
      return;
    }
    const entry = out.entry(header, (err) => next(err ?? undefined));
    stream.pipe(entry);
  });
  ex.on('finish', () => {
    const conf = Buffer.from(opts.wslConf ?? WSL_CONF, 'utf8');
    out.entry({ name: 'etc/wsl.conf', mode: 0o644, uid: 0, gid: 0, size: conf.length, mtime: new Date(0) }, conf);
    if (opts.busybox) {
      out.entry({ name: 'opt/airlock-vm/', type: 'directory', mode: 0o755, uid: 0, gid: 0, mtime: new Date(0) });
      out.entry({ name: 'opt/airlock-vm/busybox', mode: 0o755, uid: 0, gid: 0, size: opts.busybox.length, mtime: new Date(0) }, opts.busybox);
    }
    out.finalize();
  });
  await Promise.all([pipeline(input, ex), pipeline(out, output)]);
}

/**
 * Writes the WSL root filesystem of a Docker image to `outTar`: the image's files, exported through the engine API,
 * streamed through prepareWslRootfs(). Runs where Docker runs (a build machine, or Windows with
 * Docker); the result is what WslDriver's `rootfsTar` option names.
 */
export async function exportWslRootfs(image: string, outTar: string, opts: WslRootfsOptions = {}): Promise<void> {
  await withImageFilesystem(image, (tar) => prepareWslRootfs(tar, createWriteStream(outTar), opts));
}
