import { createWriteStream } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import { extract, pack, type Header } from 'tar-stream';
import { AirlockError } from '../../../contracts/errors';
import { LOADER_PRELOAD_FILE } from '../docker/container-config';
import type { Engine } from '../docker/engine';
import { withImageFilesystem } from '../docker/image-export';

/**
 * /etc/wsl.conf of every Airlock distribution: no Windows drives (automount off, no fstab), no
 * Windows interop (cannot start .exe files, no Windows PATH), no generated hosts/resolv.conf from the
 * Windows host, no systemd, no WSLg (`general.guiApplications`) and no GPU paravirtualization
 * (`gpu.enabled`), the image's non-root user by default. Keys as WSL's init reads them
 * (microsoft/WSL src/linux/init/WslDistributionConfig.cpp/.h).
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

[general]
guiApplications = false

[gpu]
enabled = false
appendLibPath = false

[user]
default = airlock
`;

/**
 * /etc/wsl-distribution.conf: without it WSL's init asks Windows for a Start-menu shortcut and a
 * Windows Terminal profile for each imported distribution, which a crash would leave behind
 * (microsoft/WSL src/linux/init/main.cpp: `shortcut.enabled`, `windowsterminal.enabled`, both default true).
 */
export const WSL_DISTRIBUTION_CONF = `# Airlock sandbox distribution: nothing is added to Windows for it.
[shortcut]
enabled = false

[windowsterminal]
enabled = false
`;

/** /etc/hosts: \`docker export\` leaves it empty and \`generateHosts = false\` keeps WSL from writing one, so localhost would not resolve. */
export const WSL_HOSTS = `127.0.0.1\tlocalhost
::1\tlocalhost ip6-localhost ip6-loopback
127.0.1.1\tairlock
`;

export interface WslRootfsOptions {
  /** A static Linux busybox, installed as /opt/airlock-vm/busybox (brings up `lo` in the run's namespace). */
  busybox?: Buffer;
  /** Replaces WSL_CONF. */
  wslConf?: string;
}

const REPLACED = new Set(['etc/wsl.conf', 'etc/wsl-distribution.conf', 'etc/hosts', 'opt/airlock-vm/busybox']);

function normalize(name: string): string {
  return name.replace(/^\.?\/+/, '').replace(/\/+$/, '');
}

/** Airlock's own state in the distribution (the Docker driver's STATE_DIR without its leading slash). */
const STATE_DIR = 'airlock';

/**
 * /airlock and everything in it as root's, writable by root only, whatever the image says: the
 * helper (uid 0) keeps its state there and the agent's user must not write it (docs/architecture.md
 * §2.3). Airlock's image already makes it so; this holds for any image the rootfs is made from.
 */
function ownedByRoot(header: Header): Header {
  const name = normalize(header.name);
  if (name !== STATE_DIR && !name.startsWith(`${STATE_DIR}/`)) return header;
  return { ...header, uid: 0, gid: 0, uname: 'root', gname: 'root', mode: (header.mode ?? 0o755) & ~0o7022 };
}

/**
 * Turns the image's root filesystem tar (`docker export`) into the tar `wsl --import` takes: every
 * entry copied unchanged (owners, modes, links) except that /airlock is made root's (ownedByRoot),
 * /etc/wsl.conf, /etc/wsl-distribution.conf and /etc/hosts replaced, and the optional busybox added
 * (the image has `ip` itself); an image with /etc/ld.so.preload is refused. Streams: the
 * image is never held in memory.
 */
export async function prepareWslRootfs(input: NodeJS.ReadableStream, output: NodeJS.WritableStream, opts: WslRootfsOptions = {}): Promise<void> {
  const ex = extract();
  const out = pack();
  let stateDirSeen = false;
  ex.on('entry', (header: Header, stream, next) => {
    if (normalize(header.name) === normalize(LOADER_PRELOAD_FILE)) {
      // Every glibc loader reads it, Airlock's own included: its libraries would load into the root helper (§2.3).
      stream.on('error', () => undefined); // the entry ends with the extract's error, reported below
      ex.destroy(new AirlockError('IMAGE_INCOMPATIBLE', `The image has ${LOADER_PRELOAD_FILE}, which would load its libraries into Airlock's helper (root in the distribution). Remove that file from the image and rebuild it.`));
      return;
    }
    if (REPLACED.has(normalize(header.name))) {
      stream.on('end', next);
      stream.resume();
      return;
    }
    if (normalize(header.name) === STATE_DIR) stateDirSeen = true;
    const entry = out.entry(ownedByRoot(header), (err) => next(err ?? undefined));
    stream.pipe(entry);
  });
  ex.on('finish', () => {
    const files: Array<[string, string]> = [['etc/wsl.conf', opts.wslConf ?? WSL_CONF], ['etc/wsl-distribution.conf', WSL_DISTRIBUTION_CONF], ['etc/hosts', WSL_HOSTS]];
    for (const [name, text] of files) {
      const body = Buffer.from(text, 'utf8');
      out.entry({ name, mode: 0o644, uid: 0, gid: 0, size: body.length, mtime: new Date(0) }, body);
    }
    if (!stateDirSeen) out.entry({ name: `${STATE_DIR}/`, type: 'directory', mode: 0o755, uid: 0, gid: 0, uname: 'root', gname: 'root', mtime: new Date(0) });
    if (opts.busybox) {
      out.entry({ name: 'opt/airlock-vm/', type: 'directory', mode: 0o755, uid: 0, gid: 0, mtime: new Date(0) });
      out.entry({ name: 'opt/airlock-vm/busybox', mode: 0o755, uid: 0, gid: 0, size: opts.busybox.length, mtime: new Date(0) }, opts.busybox);
    }
    out.finalize();
  });
  // A refused entry ends the output too, and the first cause is what the caller sees.
  const reading = pipeline(input, ex).catch((err: unknown) => {
    out.destroy(err instanceof Error ? err : new Error(String(err)));
    throw err;
  });
  const [read, written] = await Promise.allSettled([reading, pipeline(out, output)]);
  if (read.status === 'rejected') throw read.reason;
  if (written.status === 'rejected') throw written.reason;
}

/**
 * Writes the WSL root filesystem of a Docker image to `outTar`: the image's files, exported through the engine API,
 * streamed through prepareWslRootfs(). Runs where Docker runs (a build machine, or Windows with
 * Docker); the result is what WslDriver's `rootfsTar` option names.
 */
export async function exportWslRootfs(image: string, outTar: string, engine: Engine, opts: WslRootfsOptions = {}): Promise<void> {
  await withImageFilesystem(image, (tar) => prepareWslRootfs(tar, createWriteStream(outTar), opts), engine);
}
