import { randomBytes } from 'node:crypto';
import { access } from 'node:fs/promises';
import { PassThrough, type Duplex } from 'node:stream';
import type Docker from 'dockerode';
import { AirlockError } from '../../../contracts/errors';
import { LABEL_INSTALLATION, LABEL_KIND, LABEL_VOLUME } from '../labels';
import { sandboxVolumes } from './container-config';
import type { Engine } from './engine';
import { baselineCommitOfTree, treeOids } from '../../workspace/git-objects';
import type { HostGit } from '../../workspace/host-git';
import { HostRepo } from '../../workspace/host-repo';
import { BASE_RECORD_VERSION, type BaseStore, baseKey, ctimeListingScript, manifestDigest, parseCtimeListing, trustedStat, type BaseDir, type BaseFile, type BaseRecord } from '../../workspace/project-base';
import { snapshotProject, type SnapshotOptions } from '../../workspace/snapshot';
import { TAR_TO_FAST_IMPORT_JS } from '../../workspace/tar-to-fast-import';
import { BASELINE_IDENT, BASELINE_REF, gitArgv } from '../../workspace/workspace-shell';
import { debugLog } from '../../common/debug-log';

/**
 * The engine half of project bases (docs/architecture.md §11, "A project's last copy"): the volume a
 * base lives in, written only by a short-lived writer container of Airlock's that runs a fixed command
 * on a stream the host produced, and the per-run overlay volumes a sandbox starts from. A base volume
 * is never mounted into a sandbox: a sandbox sees it only as the read-only lower layer of its own
 * overlay, whose writes land in the run's upper volume and go with the run.
 */

export const LABEL_BASE_KEY = 'airlock.base.key';
/** A random value per base volume, kept in the host's record (BaseRecord.nonce). */
export const LABEL_BASE_NONCE = 'airlock.base.nonce';
export const LABEL_BASE_MANIFEST = 'airlock.base.manifest';
/** On a run's overlay volumes: the base volume they read (a base in use is never removed). */
export const LABEL_BASE_VOLUME = 'airlock.base';

const IDENT = `${BASELINE_IDENT.name} <${BASELINE_IDENT.email}> ${BASELINE_IDENT.epoch} +0000`;
const INFO_ATTRIBUTES = '* -text -filter -ident -working-tree-encoding !diff !merge !eol\n';
const INFO_EXCLUDE = 'node_modules/\n__pycache__/\n';
/** The sandbox user, who owns the copied files (as after a run's own copy-in). */
const AGENT_IDS = '1000:1000';
const WRITER_LAYOUT = { workDir: '/base/tree', stateDir: '/base/state' };


const WRITER_SCRIPT = [
  'set -e',
  'umask 022',
  'mkdir /base/tree /base/state',
  'git init -q --bare /base/state/baseline.git',
  'printf "%s" "$ATTRS" > /base/state/baseline.git/info/attributes',
  'printf "%s" "$EXCLUDE" > /base/state/baseline.git/info/exclude',
  'tee /base/state/hydrate.tar | tar -x -p --no-same-owner -C /base/tree -f -',
  'test -s /base/state/hydrate.tar',
  // The same converter and settings a run's own baseline uses: the commit id is the host's.
  `node -e "$JS" ${BASELINE_REF} "$IDENT" < /base/state/hydrate.tar | "$@" -c pack.compression=1 fast-import --quiet --done`,
  // Left empty and writable for the run's copy to spool into (a run's hydrate makes it so itself).
  ': > /base/state/hydrate.tar',
  'chmod 0666 /base/state/hydrate.tar',
  `"$@" symbolic-ref HEAD ${BASELINE_REF}`,
  `chown -R ${AGENT_IDS} /base/tree`,
  `"$@" rev-parse ${BASELINE_REF} ${BASELINE_REF}^{tree}`,
  // Every file with its change time, after the last write: what each run's start compares with.
  ctimeListingScript('/base/tree'),
].join('\n');

/** Whether bases work on this engine: Docker's local volume driver mounting overlayfs (not Podman, not rootless). */
export async function engineSupportsBases(engine: Engine): Promise<boolean> {
  try {
    const info = (await engine.docker.info()) as { SecurityOptions?: string[]; OSType?: string };
    const version = (await engine.docker.version()) as { Components?: Array<{ Name: string }> };
    const podman = (version.Components ?? []).some((c) => /podman/i.test(c.Name));
    const rootless = (info.SecurityOptions ?? []).some((o) => o.includes('rootless'));
    return !podman && !rootless && info.OSType === 'linux';
  } catch {
    return false;
  }
}

function messageOf(err: unknown): string {
  if (err && typeof err === 'object' && 'json' in err) {
    const json = (err as { json: unknown }).json;
    if (json && typeof json === 'object' && 'message' in json) return String((json as { message: unknown }).message);
  }
  return err instanceof Error ? err.message : String(err);
}

export interface CreateBaseOptions {
  engine: Engine;
  /** Host git the project is read with and the base's object store written with. */
  git: HostGit;
  /** Airlock's own sandbox image (tar, git, node; never a project's image). */
  image: string;
  store: BaseStore;
  projectDir: string;
  snapshotOptions?: SnapshotOptions;
  /** Part of the key: snapshot options that change what is copied. */
  variant?: string;
  installation?: string;
  /**
   * A file written less than this before the scan is re-read next time rather than trusted by its stat
   * (default RACY_MS; filesystems with coarse timestamps need it). Tests on nanosecond clocks pass 0.
   */
  racyMs?: number;
}

/**
 * The writer container of a base: Airlock's image, no network, read-only root, every capability dropped
 * but CHOWN and DAC_READ_SEARCH, the new volume at /base; the project's tar arrives on its stdin.
 */
function writerContainer(image: string, volume: string, key: string, installLabels: Record<string, string>): Docker.ContainerCreateOptions {
  return {
    Image: image,
    Entrypoint: ['/bin/sh', '-c', WRITER_SCRIPT, 'sh'],
    Cmd: gitArgv(WRITER_LAYOUT, []),
    User: '0:0',
    Env: [`JS=${TAR_TO_FAST_IMPORT_JS}`, `IDENT=${IDENT}`, `ATTRS=${INFO_ATTRIBUTES}`, `EXCLUDE=${INFO_EXCLUDE}`, 'PATH=/opt/airlock/bin:/usr/local/bin:/usr/bin:/bin', 'HOME=/tmp'],
    WorkingDir: '/',
    OpenStdin: true,
    StdinOnce: true,
    AttachStdin: true,
    AttachStdout: true,
    AttachStderr: true,
    NetworkDisabled: true,
    Labels: { [LABEL_KIND]: 'base-writer', [LABEL_BASE_KEY]: key, ...installLabels },
    HostConfig: {
      NetworkMode: 'none',
      ReadonlyRootfs: true,
      CapDrop: ['ALL'],
      // CHOWN: the files become the sandbox user's; DAC_READ_SEARCH: the digest lists folders a project keeps private.
      CapAdd: ['CHOWN', 'DAC_READ_SEARCH'],
      SecurityOpt: ['no-new-privileges'],
      Tmpfs: { '/tmp': 'rw,nosuid,nodev,size=64m' },
      Memory: 1024 ** 3,
      PidsLimit: 256,
      Mounts: [{ Type: 'volume', Source: volume, Target: '/base' }],
    },
  };
}

/**
 * Reads the project afresh and writes it as the base of its key: into a new volume through a writer
 * container, and into a host object store; records both. The previous base of the key is removed
 * unless a live run still reads it. What goes in is the project as read now, never a workspace.
 */
export async function createProjectBase(opts: CreateBaseOptions): Promise<BaseRecord> {
  const { engine, store } = opts;
  const docker = engine.docker;
  const key = baseKey(opts.projectDir, opts.variant);
  const previous = await store.read(key);
  const scanStarted = Date.now();
  const snapshot = await snapshotProject(opts.git, opts.projectDir, opts.snapshotOptions);
  const volume = `airlock-base-${key.slice(0, 16)}-${randomBytes(4).toString('hex')}`;
  const installLabels: Record<string, string> = opts.installation ? { [LABEL_INSTALLATION]: opts.installation } : {};
  const nonce = randomBytes(16).toString('hex');
  const repo = await HostRepo.create(opts.git, store.objectsDir(key, volume));
  const importer = await repo.importer();
  const imported: Array<{ path: string; mode: BaseFile['mode']; mark: number }> = [];
  const streams = snapshot.open(undefined, async (f, content) => void imported.push({ path: f.path, mode: f.mode, mark: await importer.blob(content) }));
  let container: Docker.Container | undefined;
  try {
    // The digest labels the volume only once known; write into a volume named for this attempt, label-free of content, then record.
    await docker.createVolume({ Name: volume, Driver: 'local', Labels: { [LABEL_KIND]: 'base', [LABEL_BASE_KEY]: key, [LABEL_BASE_NONCE]: nonce, ...installLabels } });
    container = await docker.createContainer(writerContainer(opts.image, volume, key, installLabels));
    const stream = (await container.attach({ stream: true, stdin: true, stdout: true, stderr: true, hijack: true })) as unknown as Duplex;
    const out = new PassThrough();
    const err = new PassThrough();
    const outChunks: Buffer[] = [];
    const errChunks: Buffer[] = [];
    out.on('data', (c: Buffer) => outChunks.push(c));
    err.on('data', (c: Buffer) => errChunks.length < 64 && errChunks.push(c));
    docker.modem.demuxStream(stream, out, err);
    await container.start();
    const piped = new Promise<void>((resolve, reject) => {
      streams.tar.on('error', reject);
      stream.on('error', reject);
      streams.tar.on('end', () => resolve());
      streams.tar.pipe(stream, { end: true });
    });
    const [manifest] = await Promise.all([streams.manifest, piped]);
    const exit = (await container.wait()) as { StatusCode: number };
    // Two lines (commit, tree), then the NUL-separated listing.
    const printed = Buffer.concat(outChunks);
    const firstNl = printed.indexOf(0x0a);
    const secondNl = firstNl < 0 ? -1 : printed.indexOf(0x0a, firstNl + 1);
    const commitLine = firstNl < 0 ? undefined : printed.subarray(0, firstNl).toString('utf8');
    const treeLine = secondNl < 0 ? undefined : printed.subarray(firstNl + 1, secondNl).toString('utf8');
    const ctimes = secondNl < 0 ? new Map<string, string>() : parseCtimeListing(printed.subarray(secondNl + 1));
    if (exit.StatusCode !== 0) {
      throw new AirlockError('SANDBOX_FAILED', `Writing the project base failed (exit ${exit.StatusCode}): ${Buffer.concat(errChunks).toString('utf8').trim().slice(-500) || 'no error output'}.`);
    }
    const trees = treeOids(manifest);
    const expected = baselineCommitOfTree(trees.get('') as string, IDENT, 'airlock baseline');
    if (commitLine !== expected || treeLine !== trees.get('') || !treeLine || !/^[0-9a-f]{40}$/.test(treeLine) || ctimes.size !== manifest.length || manifest.some((f) => !ctimes.has(f.path))) {
      throw new AirlockError('SANDBOX_FAILED', `The project base does not hold the project as read (${commitLine ?? 'nothing'} against ${expected}); it is not kept.`);
    }
    const hostCommit = await importer.commit({ ref: BASELINE_REF, ident: IDENT, message: 'airlock baseline\n' }, imported);
    if (hostCommit !== expected) throw new AirlockError('INTERNAL', `The host's copy of the project base (${hostCommit}) does not match the project as read (${expected}).`);
    const byPath = new Map(snapshot.entries.map((e) => [e.path, e]));
    const files: BaseFile[] = manifest.map((f) => {
      const e = byPath.get(f.path);
      const stat = e ? trustedStat(e, scanStarted, opts.racyMs) : undefined;
      return { ...f, ...(stat ? { stat } : {}), ctime: ctimes.get(f.path) as string };
    });
    const dirs: BaseDir[] = snapshot.entries.filter((e) => e.type === 'dir').map((e) => ({ path: e.path, perm: e.mode | 0o700 }));
    const info = await docker.getVolume(volume).inspect();
    const rec: BaseRecord = {
      version: BASE_RECORD_VERSION,
      key,
      projectDir: snapshot.projectDir,
      volume,
      volumeCreatedAt: String((info as { CreatedAt?: string }).CreatedAt ?? ''),
      nonce,
      mountpoint: info.Mountpoint,
      engine: engine.endpoint.display,
      ...(opts.installation ? { installation: opts.installation } : {}),
      createdAt: new Date().toISOString(),
      commit: expected,
      tree: treeLine,
      files,
      dirs,
      trees: Object.fromEntries(trees),
      manifestDigest: manifestDigest(files, dirs, Object.fromEntries(trees)),
    };
    await store.write(rec);
    if (previous) await removeBase(engine, store, previous, { keepRecord: true });
    return rec;
  } catch (err) {
    importer.abort();
    streams.tar.destroy();
    await docker.getVolume(volume).remove({ force: true }).catch(debugLog.swallow('base.volume.remove'));
    await store.removeStores(key, previous?.volume);
    throw err instanceof AirlockError ? err : new AirlockError('SANDBOX_FAILED', `Writing the project base failed: ${messageOf(err)}`, { cause: err });
  } finally {
    await container?.remove({ force: true }).catch(debugLog.swallow('base.container.remove'));
  }
}

/** Why a base is not used, or the base itself. */
export type BaseLookup = { ok: true; record: BaseRecord } | { ok: false; reason: string };

/**
 * The base of a project on this engine, if the host has one and the engine still holds exactly it:
 * same name, same creation time and nonce, labels naming the same key. Anything else (a
 * volume made again, relabelled, another engine's) is not used.
 */
export async function findProjectBase(engine: Engine, store: BaseStore, projectDir: string, variant?: string): Promise<BaseLookup> {
  const rec = await store.read(baseKey(projectDir, variant));
  if (!rec) return { ok: false, reason: 'no base recorded for this project' };
  if (rec.engine !== engine.endpoint.display) return { ok: false, reason: `the base lives on another engine (${rec.engine})` };
  let info: { Labels?: Record<string, string> | null; CreatedAt?: string; Mountpoint: string };
  try {
    info = (await engine.docker.getVolume(rec.volume).inspect()) as typeof info;
  } catch {
    return { ok: false, reason: 'the base volume is gone from the engine' };
  }
  const labels = info.Labels ?? {};
  if (labels[LABEL_BASE_KEY] !== rec.key || labels[LABEL_KIND] !== 'base') return { ok: false, reason: 'the base volume carries other labels than the host wrote' };
  if (info.CreatedAt !== rec.volumeCreatedAt || info.Mountpoint !== rec.mountpoint || labels[LABEL_BASE_NONCE] !== rec.nonce) return { ok: false, reason: 'the base volume was made again since the host wrote it' };
  if (rec.installation && labels[LABEL_INSTALLATION] !== rec.installation) return { ok: false, reason: 'the base volume belongs to another installation' };
  return { ok: true, record: rec };
}

/** Names of a run's extra overlay volumes (the upper and work folders of its workspace and state). */
export function overlayVolumeNames(runId: string): { workspaceUpper: string; workspaceWork: string; stateUpper: string; stateWork: string } {
  return {
    workspaceUpper: `airlock-${runId}-workspace-upper`,
    workspaceWork: `airlock-${runId}-workspace-work`,
    stateUpper: `airlock-${runId}-state-upper`,
    stateWork: `airlock-${runId}-state-work`,
  };
}

/**
 * Makes the run's workspace and state volumes as overlays of the base (created before the sandbox,
 * which then mounts them as its own): no byte is copied; the base is the read-only lower layer,
 * the run's writes land in its own upper volumes. Every volume carries the run's labels, so the
 * wipe removes and checks them like any run volume. `image` must be Airlock's own (its empty
 * `/workspace` gives the upper folder the sandbox user's ownership).
 */
export async function prepareBaseVolumes(engine: Engine, opts: { runId: string; record: BaseRecord; image: string; installation?: string }): Promise<void> {
  const docker = engine.docker;
  const [ws, st] = sandboxVolumes(opts.runId, opts.installation) as [ReturnType<typeof sandboxVolumes>[number], ReturnType<typeof sandboxVolumes>[number]];
  const names = overlayVolumeNames(opts.runId);
  const extra = [
    { Name: names.workspaceUpper, Labels: { ...ws.Labels, [LABEL_VOLUME]: 'workspace-upper' } },
    { Name: names.workspaceWork, Labels: { ...ws.Labels, [LABEL_VOLUME]: 'workspace-work' } },
    { Name: names.stateUpper, Labels: { ...st.Labels, [LABEL_VOLUME]: 'state-upper' } },
    { Name: names.stateWork, Labels: { ...st.Labels, [LABEL_VOLUME]: 'state-work' } },
  ];
  await Promise.all(extra.map((v) => docker.createVolume({ Name: v.Name, Labels: v.Labels, Driver: 'local' })));
  // The upper folder's root is the merged root: give it the ownership of the image's /workspace (copy-up on
  // create; nothing runs). Independent of the overlay volumes' creation, which mounts nothing: both at once.
  const owned = (async () => {
    const prep = await docker.createContainer({
      name: `airlock-${opts.runId}-base-prep`,
      Image: opts.image,
      Entrypoint: ['/bin/true'],
      NetworkDisabled: true,
      Labels: { ...ws.Labels, [LABEL_KIND]: 'volume' },
      HostConfig: { NetworkMode: 'none', Mounts: [{ Type: 'volume', Source: names.workspaceUpper, Target: ws.target }] },
    });
    await prep.remove({ force: true });
  })();
  const overlays = (async () => {
    const mp = Object.fromEntries(await Promise.all(extra.map(async (v) => [v.Name, (await docker.getVolume(v.Name).inspect()).Mountpoint] as const))) as Record<string, string>;
    const overlay = (lower: string, upper: string, work: string) => ({ type: 'overlay', device: 'overlay', o: `lowerdir=${lower},upperdir=${upper},workdir=${work}` });
    await Promise.all([
      docker.createVolume({
        Name: ws.Name,
        Driver: 'local',
        Labels: { ...ws.Labels, [LABEL_BASE_VOLUME]: opts.record.volume },
        DriverOpts: overlay(`${opts.record.mountpoint}/tree`, mp[names.workspaceUpper] as string, mp[names.workspaceWork] as string),
      }),
      docker.createVolume({
        Name: st.Name,
        Driver: 'local',
        Labels: { ...st.Labels, [LABEL_BASE_VOLUME]: opts.record.volume },
        DriverOpts: overlay(`${opts.record.mountpoint}/state`, mp[names.stateUpper] as string, mp[names.stateWork] as string),
      }),
    ]);
  })();
  const [a, b] = await Promise.allSettled([owned, overlays]);
  if (a.status === 'rejected') throw a.reason;
  if (b.status === 'rejected') throw b.reason;
}

/** Whether a live run's overlay reads this base. */
async function baseInUse(docker: Docker, volume: string): Promise<boolean> {
  const r = await docker.listVolumes({ filters: { label: [`${LABEL_BASE_VOLUME}=${volume}`] } });
  return (r.Volumes ?? []).length > 0;
}

/** Removes a base (volume and host store) unless a live run reads it; says whether it went. */
export async function removeBase(engine: Engine, store: BaseStore, rec: BaseRecord, opts: { keepRecord?: boolean } = {}): Promise<boolean> {
  if (await baseInUse(engine.docker, rec.volume)) return false;
  await engine.docker
    .getVolume(rec.volume)
    .remove({ force: true })
    .catch((err: unknown) => {
      if ((err as { statusCode?: number }).statusCode !== 404) throw err;
    });
  const current = opts.keepRecord ? await store.read(rec.key) : undefined;
  await store.removeStores(rec.key, current && current.volume !== rec.volume ? current.volume : undefined);
  return true;
}

export interface BaseListing {
  record: BaseRecord;
  projectExists: boolean;
  bytes: number;
}

/** A listing as `airlock env list` and the app show it. */
export function baseInfo(b: BaseListing): { project: string; volume: string; files: number; sizeBytes: number; createdAt: string; projectExists: boolean } {
  return { project: b.record.projectDir, volume: b.record.volume, files: b.record.files.length, sizeBytes: b.bytes, createdAt: b.record.createdAt, projectExists: b.projectExists };
}

/** The bases this host keeps on `engine`. */
export async function listProjectBases(engine: Engine, store: BaseStore): Promise<BaseListing[]> {
  const out: BaseListing[] = [];
  for (const record of await store.list()) {
    if (record.engine !== engine.endpoint.display) continue;
    const projectExists = await access(record.projectDir).then(
      () => true,
      () => false,
    );
    out.push({ record, projectExists, bytes: record.files.reduce((n, f) => n + f.size, 0) });
  }
  return out;
}

/**
 * Removes bases: those whose project folder is gone, or every one with `all`; never one a live run
 * reads. Also removes base volumes of this installation the host has no record of (a crash between
 * writing and recording).
 */
export interface PruneBasesResult {
  /** Project folders whose base went (or the volume's name, for one the host had no record of). */
  removed: string[];
  kept: string[];
  freedBytes: number;
}

export async function pruneProjectBases(engine: Engine, store: BaseStore, opts: { all?: boolean; installation?: string } = {}): Promise<PruneBasesResult> {
  const removed: string[] = [];
  const kept: string[] = [];
  let freedBytes = 0;
  const known = new Set<string>();
  for (const b of await listProjectBases(engine, store)) {
    known.add(b.record.volume);
    if (!opts.all && b.projectExists) {
      kept.push(b.record.projectDir);
      continue;
    }
    if (await removeBase(engine, store, b.record)) {
      removed.push(b.record.projectDir);
      freedBytes += b.bytes;
    } else kept.push(b.record.projectDir);
  }
  // Volumes of this installation the host has no record of (a crash between writing and recording), with `all` only:
  // a base being written right now has no record yet either.
  if (!opts.all || !opts.installation) return { removed, kept, freedBytes };
  const filters = { label: [`${LABEL_KIND}=base`, `${LABEL_INSTALLATION}=${opts.installation}`] };
  const vols = (await engine.docker.listVolumes({ filters })).Volumes ?? [];
  for (const v of vols) {
    if (known.has(v.Name) || (await baseInUse(engine.docker, v.Name))) continue;
    await engine.docker.getVolume(v.Name).remove({ force: true }).catch(debugLog.swallow('base.volume.prune'));
    removed.push(v.Name);
  }
  return { removed, kept, freedBytes };
}
