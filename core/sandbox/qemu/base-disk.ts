import { randomBytes } from 'node:crypto';
import { chmod, copyFile, mkdir, readdir, readFile, rename, rm, stat, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { AirlockError } from '../../../contracts/errors';
import { runToolOk } from '../../common/run-tool';
import type { Engine } from '../docker/engine';
import { inspectImageConfig, withImageFilesystem, type ImageConfig } from '../docker/image-export';
import type { VmPaths } from './vm-paths';
import { pathExists } from '../../common/path-exists';
import { z } from 'zod';
import { parseStoredJson } from '../../common/stored-json';
import { sha256Hex, sha256File } from '../../common/sha256';
import { LABEL_DERIVED_FROM } from '../labels';
import { checkGuestImage, guestHelperCommand } from './guest-image';
import { debugLog } from '../../common/debug-log';

/** Bump when the layout of a base disk changes, so old ones are not reused. */
const BASE_FORMAT = 'airlock-vm-base/3';
/** A derived image's sandbox home, as in its containers (docs/architecture.md §16): whatever its passwd or ENV say. */
const DERIVED_HOME = '/home/airlock';

/** What the guest init needs to know about the image (written to /opt/airlock-vm/config.sh). */
export interface GuestUser {
  uid: number;
  gid: number;
  home: string;
  workdir: string;
}

/** What is read back of a base disk's `<key>.json` (written next to the disk by `buildBaseDisk`). */
const BaseDiskMeta = z.object({
  user: z.object({ uid: z.number().int().nonnegative(), gid: z.number().int().nonnegative(), home: z.string().min(1), workdir: z.string().min(1) }),
  sizeBytes: z.number().int().nonnegative(),
});

export interface BaseDisk {
  /** Raw ext4 image of the sandbox image's filesystem; read-only, shared by every run of this image version. */
  path: string;
  imageId: string;
  user: GuestUser;
  sizeBytes: number;
}

function shellQuote(v: string): string {
  return `'${v.replaceAll("'", `'\\''`)}'`;
}

/** Resolves the image's `USER` (name, uid or uid:gid) against its /etc/passwd; root is refused. */
export function resolveGuestUser(userSpec: string, passwd: string, env: string[], workdir: string): GuestUser {
  const entries = passwd
    .split('\n')
    .map((l) => l.split(':'))
    .filter((f) => f.length >= 7)
    .map((f) => ({ name: f[0] as string, uid: Number(f[2]), gid: Number(f[3]), home: f[5] as string }));
  const [u, g] = (userSpec || '1000').split(':') as [string, string | undefined];
  const byName = entries.find((e) => e.name === u);
  const uid = /^\d+$/.test(u) ? Number(u) : byName?.uid;
  if (uid === undefined) throw new AirlockError('IMAGE_INCOMPATIBLE', `The image's user '${u}' is not in its /etc/passwd.`);
  if (uid === 0) throw new AirlockError('IMAGE_INCOMPATIBLE', 'The image runs as root; Airlock VMs run the helper as a non-root user. Set USER in the image to a non-root user.');
  const entry = entries.find((e) => e.uid === uid);
  const gid = g && /^\d+$/.test(g) ? Number(g) : (entry?.gid ?? uid);
  const envHome = env.find((e) => e.startsWith('HOME='))?.slice(5);
  return { uid, gid, home: envHome || entry?.home || '/tmp', workdir };
}

function configScript(user: GuestUser, helper: string[]): string {
  return [
    '# Written by core/sandbox/qemu/base-disk.ts; read by /opt/airlock-vm/init.',
    `AIRLOCK_UID=${user.uid}`,
    `AIRLOCK_GID=${user.gid}`,
    `AIRLOCK_HOME_DIR=${shellQuote(user.home)}`,
    `AIRLOCK_WORKDIR=${shellQuote(user.workdir)}`,
    `AIRLOCK_HELPER=${shellQuote(helper.join(' '))}`,
    '',
  ].join('\n');
}


const building = new Map<string, Promise<BaseDisk>>();

/** How many base disks (image versions) stay cached after a new one is made. */
export const BASE_DISKS_KEPT = 3;

/** `<key>.used`: touched each time a base disk is reused (its mtime is the disk's last use). */
function usedMarker(diskPath: string): string {
  return diskPath.replace(/\.img$/, '.used');
}

async function markUsed(diskPath: string): Promise<void> {
  const marker = usedMarker(diskPath);
  const now = new Date();
  await utimes(marker, now, now).catch(() => writeFile(marker, '', { mode: 0o600 }).catch(debugLog.swallow('vm.base.markUsed')));
}

/** Deletes all but the `keep` most recently made or used base disks; returns the names removed. */
export async function pruneBaseDisks(paths: VmPaths, keep: number): Promise<string[]> {
  const names = (await readdir(paths.baseDir).catch(() => [] as string[])).filter((n) => /^[0-9a-f]{20}\.img$/.test(n));
  const mtime = async (file: string) => (await stat(file).catch(() => undefined))?.mtimeMs ?? 0; // a disk gone meanwhile sorts oldest
  const dated = await Promise.all(names.map(async (n) => ({ n, t: Math.max(await mtime(path.join(paths.baseDir, n)), await mtime(usedMarker(path.join(paths.baseDir, n)))) })));
  dated.sort((a, b) => b.t - a.t);
  const removed: string[] = [];
  for (const { n } of dated.slice(Math.max(0, keep))) {
    const disk = path.join(paths.baseDir, n);
    await rm(disk, { force: true });
    await rm(disk.replace(/\.img$/, '.json'), { force: true });
    await rm(usedMarker(disk), { force: true });
    removed.push(n);
  }
  // Markers whose disk is gone (deleted by hand, or by an older Airlock that kept none).
  const left = new Set(await readdir(paths.baseDir).catch(() => [] as string[]));
  for (const n of left) if (/^[0-9a-f]{20}\.used$/.test(n) && !left.has(n.replace(/\.used$/, '.img'))) await rm(path.join(paths.baseDir, n), { force: true });
  return removed;
}

/**
 * The read-only base disk of `image` (one per image id: Airlock's own image or a project's derived
 * image, docs/architecture.md §16), made on first use:
 * the image's files (exported through the engine API) → a directory → `mke2fs -t ext4 -d` (no loop mount,
 * no root needed for the mount; ownership needs root or `fakeroot`). The guest init, a static
 * busybox and the image's user are added under /opt/airlock-vm (never its ENV: the helper starts from
 * Airlock's fixed environment, docs/architecture.md §2.3; commands get the image's ENV from the host).
 */
export async function ensureBaseDisk(image: string, paths: VmPaths, engine: Engine, env: NodeJS.ProcessEnv, onProgress?: (message: string) => void): Promise<BaseDisk> {
  const config = await inspectImageConfig(image, "the VM's disk", engine);
  const initPath = path.join(paths.resourcesDir, 'guest-init.sh');
  const [initHash, busyboxHash] = await Promise.all([
    sha256File(initPath).catch(() => {
      throw new AirlockError('VM_UNAVAILABLE', `The guest init script is missing at ${initPath}; reinstall Airlock.`);
    }),
    sha256File(paths.busybox).catch(() => {
      throw new AirlockError('VM_UNAVAILABLE', `VM assets are missing (${paths.busybox}); run scripts/prepare-vm-assets.sh.`);
    }),
  ]);
  const key = sha256Hex(`${BASE_FORMAT}\n${config.id}\n${initHash}\n${busyboxHash}`).slice(0, 20);
  const diskPath = path.join(paths.baseDir, `${key}.img`);
  const metaPath = path.join(paths.baseDir, `${key}.json`);
  if ((await pathExists(diskPath)) && (await pathExists(metaPath))) {
    const meta = parseStoredJson(BaseDiskMeta, metaPath, await readFile(metaPath, 'utf8'), `delete it and ${diskPath}; the next VM run builds them again.`);
    // Used now: pruning keeps the most recently used disks, not the most recently made. A marker
    // beside the disk, never the disk itself: the VM snapshot's key covers the disk's mtime.
    await markUsed(diskPath);
    return { path: diskPath, imageId: config.id, user: meta.user, sizeBytes: meta.sizeBytes };
  }
  let pending = building.get(key);
  if (!pending) {
    pending = buildBaseDisk(image, config, engine, env, paths, initPath, diskPath, metaPath, onProgress).finally(() => building.delete(key));
    building.set(key, pending);
  }
  return pending;
}

async function buildBaseDisk(
  image: string,
  config: ImageConfig,
  engine: Engine,
  env: NodeJS.ProcessEnv,
  paths: VmPaths,
  initPath: string,
  diskPath: string,
  metaPath: string,
  onProgress?: (message: string) => void,
): Promise<BaseDisk> {
  await mkdir(paths.baseDir, { recursive: true });
  const tmpTag = `${process.pid}-${randomBytes(4).toString('hex')}`;
  const root = path.join(paths.baseDir, `.build-${tmpTag}`);
  const tmpImg = path.join(paths.baseDir, `.build-${tmpTag}.img`);
  await mkdir(root, { recursive: true });
  try {
    onProgress?.(`exporting the filesystem of ${image}`);
    // Unpacked under fakeroot when not root, so ownership survives into the file system made below.
    const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
    const untar = ['tar', '-x', '-C', root, '--numeric-owner'];
    const unpack = isRoot ? untar : ['fakeroot', '-s', `${root}.fakeroot`, '--', ...untar];
    await withImageFilesystem(image, (tar) => runToolOk(unpack[0] as string, unpack.slice(1), 'Could not export the sandbox image for the VM', { input: tar, timeoutMs: 10 * 60_000, env }), engine);

    const passwd = await readFile(path.join(root, 'etc', 'passwd'), 'utf8').catch(() => '');
    const resolved = resolveGuestUser(config.user, passwd, config.env, config.workdir);
    // A derived image's sandbox runs as uid 1000 with Airlock's home, whatever the project's image says.
    const user = config.labels[LABEL_DERIVED_FROM] ? { ...resolved, home: DERIVED_HOME } : resolved;
    await checkGuestImage(root, image, config.env);
    const helper = guestHelperCommand();
    const vmDir = path.join(root, 'opt', 'airlock-vm');
    await mkdir(vmDir, { recursive: true });
    await copyFile(paths.busybox, path.join(vmDir, 'busybox'));
    await chmod(path.join(vmDir, 'busybox'), 0o755);
    await copyFile(initPath, path.join(vmDir, 'init'));
    await chmod(path.join(vmDir, 'init'), 0o755);
    await writeFile(path.join(vmDir, 'config.sh'), configScript(user, helper), { mode: 0o644 });
    // Mount points the guest init needs on the read-only root.
    for (const d of ['workspace', 'airlock', 'tmp', 'run', 'proc', 'sys', 'dev']) await mkdir(path.join(root, d), { recursive: true });
    await mkdir(path.join(root, user.home.replace(/^\/+/, '')), { recursive: true });

    const [du, inodes] = await Promise.all([
      runToolOk('du', ['-sk', root], 'Could not size the VM disk', { timeoutMs: 120_000, env }),
      runToolOk('du', ['-s', '--inodes', root], 'Could not size the VM disk', { timeoutMs: 120_000, env }),
    ]);
    const usedK = Number.parseInt(du.stdout.toString(), 10);
    const files = Number.parseInt(inodes.stdout.toString(), 10);
    // Room for ext4 metadata; the root is mounted read-only, so no free space is needed beyond that.
    const sizeK = Math.ceil(usedK * 1.15) + 64 * 1024;
    const inodeCount = Math.ceil(files * 1.25) + 4096;
    onProgress?.(`writing the VM base disk (${Math.round(sizeK / 1024)} MiB)`);
    const mkfs = ['mke2fs', '-q', '-F', '-t', 'ext4', '-O', '^has_journal', '-L', 'airlock-root', '-N', String(inodeCount), '-d', root, tmpImg, `${sizeK}k`];
    const mk = isRoot ? mkfs : ['fakeroot', '-i', `${root}.fakeroot`, '--', ...mkfs];
    await runToolOk(mk[0] as string, mk.slice(1), 'Could not write the VM base disk', { timeoutMs: 10 * 60_000, env });
    await chmod(tmpImg, 0o444);
    const sizeBytes = sizeK * 1024;
    await writeFile(metaPath, JSON.stringify({ image, imageId: config.id, user, sizeBytes, createdAt: new Date().toISOString() }, null, 2));
    await rename(tmpImg, diskPath);
    // Older image versions' disks are ~1 GB each: keep a few (running VMs hold theirs open anyway).
    await pruneBaseDisks(paths, BASE_DISKS_KEPT).catch(debugLog.swallow('vm.base.prune'));
    onProgress?.('VM base disk ready');
    return { path: diskPath, imageId: config.id, user, sizeBytes };
  } finally {
    await Promise.all([rm(root, { recursive: true, force: true }), rm(tmpImg, { force: true }), rm(`${root}.fakeroot`, { force: true })]);
  }
}
