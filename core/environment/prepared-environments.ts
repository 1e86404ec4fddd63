import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type Docker from 'dockerode';
import { z } from 'zod';
import type { PreparedEnvironmentInfo, PruneResult } from '../../contracts/environments';
import { AirlockError } from '../../contracts/errors';
import { StoredFile } from '../common/stored-file';
import { parseStoredJson } from '../common/stored-json';
import type { ChannelClient } from '../channel/channel-client';
import { LABEL_INSTALLATION } from '../sandbox/labels';
import { AIRLOCK_TOOLS_BIN } from './derived-image';
import { checkPreparedTar } from './prepared-tar-check';
import type { DevcontainerEnvironment } from './devcontainer-config';
import type { SetupPlan } from './setup-plan';
import { debugLog } from '../common/debug-log';

/**
 * Prepared environments (docs/architecture.md §16, "Prepared environments"; Codespaces calls them
 * prebuilds): what a successful setup left — the files it added or changed in the workspace and the
 * sandbox user's home — captured before the run token exists and before the agent starts, and kept
 * as an image `airlock-prepared:<key>` FROM the derived image, with the state under
 * `/opt/airlock-prepared`. The key is the hash of the setup's inputs; the next run on the same
 * inputs starts from that image and copies the state into place instead of running setup.
 */

/** Bump when what is captured or how it is restored changes: every prepared environment is made again. */
export const PREPARE_RECIPE = 'airlock-prepared-v1';
export const PREPARED_REPOSITORY = 'airlock-prepared';
/** Where the state lives in a prepared image (read-only at run time; copied into the tmpfs home and the workspace volume). */
export const PREPARED_DIR = '/opt/airlock-prepared';
export const LABEL_PREPARED = 'airlock.prepared';
const LABEL_KEY = 'airlock.prepared.key';
const LABEL_PROJECT = 'airlock.prepared.project';
const LABEL_CONFIG = 'airlock.prepared.config';
const LABEL_BASE = 'airlock.prepared.base-image-id';
const LABEL_INPUTS = 'airlock.prepared.inputs';
const LABEL_CREATED = 'airlock.prepared.created';
/** How many workspace entries the image holds (set by the host when it commits; absent on older images). */
const LABEL_WORKSPACE_ENTRIES = 'airlock.prepared.workspace-entries';
const WORKSPACE = '/workspace';
const HOME = '/home/airlock';

/** What a prepared environment is keyed by, and what `airlock env list` shows of it. */
export interface PreparedInputs {
  /** This Airlock home's installation id: on a shared engine each installation sees only its own. */
  installation: string;
  project: string;
  config: string;
  /** The derived image id: the user's image id, Airlock's runtime and the derive recipe. */
  derivedImageId: string;
  baseImageId: string;
  /** sha256 of the devcontainer's content (config, Dockerfile, compose files). */
  configHash: string;
  /** The lifecycle commands, as they run. */
  commands: string;
  /** The manifests and lockfiles setup's network was derived from, and their sha256. */
  files: Record<string, string>;
  setupAllowlist: string[];
}

export interface PreparedLookup {
  key: string;
  ref: string;
  inputs: PreparedInputs;
  /** The prepared image's id when one exists for these inputs. */
  existingId?: string;
  /**
   * Whether the existing image has workspace files to put back: false only when the host recorded,
   * at commit, that setup left none (then a run on it has nothing to restore there or to collect).
   */
  restoresWorkspace?: boolean;
}

/** The inputs of a setup, read on the host (the manifests' bytes from the project folder). */
export async function preparedInputs(projectDir: string, cfg: DevcontainerEnvironment, plan: SetupPlan, d: { installation: string; derivedImageId: string; baseImageId: string; setupAllowlist?: string[] }): Promise<PreparedInputs> {
  const files: Record<string, string> = {};
  for (const f of plan.impliedBy) files[f] = createHash('sha256').update(await readFile(path.join(projectDir, f))).digest('hex');
  // The folder is part of what the commands are when it is not the project's root.
  const commands = JSON.stringify(plan.cwd === '/workspace' ? plan.hooks : { hooks: plan.hooks, cwd: plan.cwd });
  return { installation: d.installation, project: path.resolve(projectDir), config: cfg.configPath, derivedImageId: d.derivedImageId, baseImageId: d.baseImageId, configHash: cfg.contentHash, commands, files, setupAllowlist: [...(d.setupAllowlist ?? [])].sort() };
}

export function preparedKey(i: PreparedInputs): string {
  const files = Object.entries(i.files).sort(([a], [b]) => a.localeCompare(b));
  return createHash('sha256').update(JSON.stringify([PREPARE_RECIPE, i.installation, i.project, i.config, i.derivedImageId, i.configHash, i.commands, files, i.setupAllowlist])).digest('hex').slice(0, 24);
}

/** Looks the inputs' prepared environment up on the engine. */
export async function lookupPrepared(docker: Docker, inputs: PreparedInputs): Promise<PreparedLookup> {
  const key = preparedKey(inputs);
  const ref = `${PREPARED_REPOSITORY}:${key}`;
  const existing = await docker
    .getImage(ref)
    .inspect()
    .then((i) => (i.Config?.Labels?.[LABEL_KEY] === key ? { id: i.Id, entries: i.Config.Labels[LABEL_WORKSPACE_ENTRIES] } : undefined))
    .catch(() => undefined); // no image under this ref (or another key's): nothing to reuse, setup runs
  return { key, ref, inputs, ...(existing ? { existingId: existing.id, restoresWorkspace: existing.entries !== '0' } : {}) };
}

/**
 * The shell commands that put a prepared environment's state in place in a new sandbox: the home
 * (independent of the project, so it may run while the project is copied in), then the workspace
 * files setup made or changed, over the freshly hydrated project.
 */
export function restoreArgv(part: 'home' | 'workspace'): string[] {
  const dir = part === 'home' ? HOME : WORKSPACE;
  const script = `set -e; if [ -d ${PREPARED_DIR}${dir} ]; then ${AIRLOCK_TOOLS_BIN}/tar -c -C ${PREPARED_DIR}${dir} . | ${AIRLOCK_TOOLS_BIN}/tar -x -p -C ${dir}; fi`;
  return ['/bin/sh', '-c', script];
}

/**
 * Captures the state setup left in the sandbox and commits it as the prepared image. What is kept:
 * every path of the workspace except the project's own files setup left as hydrated (so a later
 * run's project copy is never overwritten by an old one) and the sandbox's `.git`, and the whole
 * home. The sandbox holds no run token and no key at this point (setup runs before the network
 * step), and nothing of the agent has run. Resolves once the state has left the sandbox (a tar on
 * the host): the agent may start then. `image` settles when the prepared image is committed from
 * that tar (about a second of engine work, off the agent's path) with its id and size.
 */
export async function capturePrepared(
  docker: Docker,
  channel: ChannelClient,
  target: PreparedLookup & { derivedRef: string },
  unchangedProjectFiles: Set<string>,
): Promise<{ image: Promise<{ id: string; size: number }> }> {
  const listing = await channel.run({ argv: ['/bin/sh', '-c', `${AIRLOCK_TOOLS_BIN}/find ${WORKSPACE} -mindepth 1 -path ${WORKSPACE}/.git -prune -o -print0; ${AIRLOCK_TOOLS_BIN}/find ${HOME} -mindepth 1 -print0`], timeoutMs: 10 * 60_000, maxOutputBytes: 256 * 1024 * 1024 });
  if (listing.exitCode !== 0) throw new AirlockError('SANDBOX_FAILED', `listing the prepared state failed (${listing.exitCode}): ${listing.stderr.toString('utf8').slice(0, 500)}`);
  const names: string[] = [];
  for (const abs of listing.stdout.toString('utf8').split('\0')) {
    if (abs.startsWith(`${WORKSPACE}/`)) {
      const rel = abs.slice(WORKSPACE.length + 1);
      if (!unchangedProjectFiles.has(rel)) names.push(`workspace/${rel}`);
    } else if (abs.startsWith(`${HOME}/`)) names.push(abs.slice(1));
  }
  // The names go to tar on its stdin: no list file a process of the sandbox could change or re-point.
  const dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-prepared-'));
  const tarFile = path.join(dir, 'state.tar');
  const removeTar = () => rm(dir, { recursive: true, force: true });
  try {
    await streamToFile(channel, ['/bin/sh', '-c', tarScript()], Buffer.from(names.map((n) => `${n}\0`).join('')), tarFile);
  } catch (err) {
    await removeTar();
    throw err;
  }
  // Checked on the host before the engine extracts it (off the agent's path, like the commit).
  const image = checkPreparedTar(tarFile)
    .then(() => commitPrepared(docker, target, tarFile, workspaceEntriesToRestore(names, unchangedProjectFiles)))
    .finally(removeTar);
  return { image };
}

/**
 * How many of the captured workspace entries a later run would have to put back: the folders of the
 * project's own files are there already (hydrated), and restoring them changes nothing a result is
 * made of, so they do not count. None left: a run on the image skips the restore and the collect.
 */
function workspaceEntriesToRestore(names: string[], unchangedProjectFiles: Set<string>): number {
  const projectFolders = new Set<string>();
  for (const file of unchangedProjectFiles) {
    for (let d = path.posix.dirname(file); d !== '.' && !projectFolders.has(d); d = path.posix.dirname(d)) projectFolders.add(d);
  }
  return names.filter((n) => n.startsWith('workspace/') && !projectFolders.has(n.slice('workspace/'.length))).length;
}

/** The tar of the listed names (relative to `/`: `workspace/…`, `home/airlock/…`), nothing else. */
function tarScript(): string {
  return `exec ${AIRLOCK_TOOLS_BIN}/tar -c --null --no-recursion -C / -f - -T -`;
}

async function streamToFile(channel: ChannelClient, argv: string[], stdin: Buffer, file: string): Promise<void> {
  const { createWriteStream } = await import('node:fs');
  const out = createWriteStream(file);
  const proc = channel.spawn({ argv, timeoutMs: 30 * 60_000, maxOutputBytes: 8 * 1024 ** 3 });
  let stderr = '';
  const subs = [proc.onStdout((c) => out.write(c)), proc.onStderr((c) => (stderr = (stderr + c.toString('utf8')).slice(-2000)))];
  proc.write(stdin);
  proc.end();
  try {
    const exit = await proc.exited;
    if (exit.exitCode !== 0) throw new AirlockError('SANDBOX_FAILED', `capturing the prepared state failed (tar exited ${exit.exitCode ?? 'killed'}): ${stderr.trim()}`);
  } finally {
    for (const s of subs) s.dispose();
    await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
  }
}

/**
 * Makes the prepared image: a container of the derived image that never starts, the state put into
 * it through the engine's archive API, committed with the inputs as labels. A commit of this
 * never-started container, not of the run's sandbox: the sandbox's root is read-only and setup's
 * changes live in its volume and tmpfs, which a commit of it would not hold.
 */
async function commitPrepared(docker: Docker, t: PreparedLookup & { derivedRef: string }, tarFile: string, workspaceEntries: number): Promise<{ id: string; size: number }> {
  const derived = await docker.getImage(t.derivedRef).inspect();
  const labels: Record<string, string> = {
    ...(derived.Config?.Labels ?? {}),
    [LABEL_PREPARED]: '1',
    [LABEL_INSTALLATION]: t.inputs.installation,
    [LABEL_KEY]: t.key,
    [LABEL_PROJECT]: t.inputs.project,
    [LABEL_CONFIG]: t.inputs.config,
    [LABEL_BASE]: t.inputs.baseImageId,
    [LABEL_INPUTS]: JSON.stringify({ files: Object.keys(t.inputs.files), setupAllowlist: t.inputs.setupAllowlist, derivedImageId: t.inputs.derivedImageId }),
    [LABEL_CREATED]: new Date().toISOString(),
    [LABEL_WORKSPACE_ENTRIES]: String(workspaceEntries),
  };
  const container = await docker.createContainer({
    Image: derived.Id,
    // Never started; the engine still wants a command. The image keeps the derived image's own.
    Cmd: derived.Config?.Cmd?.length || derived.Config?.Entrypoint?.length ? (derived.Config?.Cmd ?? []) : ['/bin/sh'],
    Entrypoint: derived.Config?.Entrypoint ?? [],
    User: derived.Config?.User ?? '1000:1000',
    WorkingDir: derived.Config?.WorkingDir ?? WORKSPACE,
    Env: derived.Config?.Env ?? [],
    Labels: labels,
    NetworkDisabled: true,
    HostConfig: { NetworkMode: 'none', AutoRemove: false },
  });
  try {
    // The target folder must exist before the archive API writes into it.
    await container.putArchive(emptyDirTar('airlock-prepared'), { path: '/opt' });
    await container.putArchive(createReadStream(tarFile), { path: PREPARED_DIR });
    const [repo, tag] = [PREPARED_REPOSITORY, t.key];
    const committed = (await container.commit({ repo, tag, comment: `Airlock prepared environment (${PREPARE_RECIPE}) of ${t.inputs.config}` })) as { Id?: string; id?: string };
    const id = committed.Id ?? committed.id ?? (await docker.getImage(t.ref).inspect()).Id;
    const info = await docker.getImage(id).inspect();
    return { id, size: info.Size ?? 0 };
  } finally {
    await container.remove({ force: true, v: true }).catch(debugLog.swallow('prepared.capture.removeContainer'));
  }
}

/** A tar with one directory entry `name/` owned by root, mode 755. */
function emptyDirTar(name: string): Buffer {
  const header = Buffer.alloc(512, 0);
  const put = (s: string, off: number, len: number) => header.write(s, off, len, 'utf8');
  put(`${name}/`, 0, 100);
  put('0000755\0', 100, 8);
  put('0000000\0', 108, 8);
  put('0000000\0', 116, 8);
  put('00000000000\0', 124, 12);
  put(`${Math.floor(Date.now() / 1000).toString(8).padStart(11, '0')}\0`, 136, 12);
  put('        ', 148, 8);
  put('5', 156, 1);
  put('ustar\0', 257, 6);
  put('00', 263, 2);
  let sum = 0;
  for (const b of header) sum += b;
  put(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8);
  return Buffer.concat([header, Buffer.alloc(1024, 0)]);
}

/** When each prepared environment was last used (image labels cannot change): `<home>/prepared-environments.json`. */
const UsageFile = z.object({ version: z.literal(1), lastUsed: z.record(z.string(), z.string()) });

export class PreparedUsage {
  private readonly stored: StoredFile<z.infer<typeof UsageFile>>;
  constructor(home: string) {
    this.stored = new StoredFile(path.join(home, 'prepared-environments.json'), {
      parse: (file, text) => parseStoredJson(UsageFile, file, text, "delete it: it only dates the prepared environments' last use ('airlock env prune' then goes by creation time)."),
      empty: () => ({ version: 1, lastUsed: {} }),
    });
  }
  async read(): Promise<Record<string, string>> {
    return (await this.stored.read()).lastUsed;
  }
  async touch(key: string): Promise<void> {
    await this.stored.update(({ lastUsed }) => ({ version: 1, lastUsed: { ...lastUsed, [key]: new Date().toISOString() } }));
  }
  async forget(keys: string[]): Promise<void> {
    await this.stored.update(({ lastUsed }) => ({ version: 1, lastUsed: Object.fromEntries(Object.entries(lastUsed).filter(([k]) => !keys.includes(k))) }));
  }
}

/** This installation's prepared environments on the engine, newest first. */
export async function listPrepared(docker: Docker, usage: PreparedUsage, installation: string): Promise<PreparedEnvironmentInfo[]> {
  const images = await docker.listImages({ filters: JSON.stringify({ label: [`${LABEL_PREPARED}=1`, `${LABEL_INSTALLATION}=${installation}`] }) });
  const used = await usage.read();
  const out: PreparedEnvironmentInfo[] = [];
  // The size of what preparing added: the image's size less the derived image it was made FROM (shared layers).
  const derivedSizes = new Map<string, number>();
  const derivedSize = async (id: string | undefined): Promise<number> => {
    if (!id) return 0;
    if (!derivedSizes.has(id)) derivedSizes.set(id, await docker.getImage(id).inspect().then((i) => i.Size ?? 0, () => 0));
    return derivedSizes.get(id) ?? 0;
  };
  for (const img of images) {
    const l = img.Labels ?? {};
    const key = l[LABEL_KEY];
    if (!key) continue;
    let inputs: { files?: string[]; setupAllowlist?: string[]; derivedImageId?: string } = {};
    try {
      inputs = JSON.parse(l[LABEL_INPUTS] ?? '{}') as typeof inputs;
    } catch {
      // A hand-edited label: shown without its inputs.
    }
    const created = l[LABEL_CREATED] ?? new Date(img.Created * 1000).toISOString();
    out.push({
      key,
      image: `${PREPARED_REPOSITORY}:${key}`,
      imageId: img.Id,
      project: l[LABEL_PROJECT] ?? '',
      config: l[LABEL_CONFIG] ?? '',
      baseImageId: l[LABEL_BASE] ?? '',
      files: Array.isArray(inputs.files) ? inputs.files.filter((f): f is string => typeof f === 'string') : [],
      sizeBytes: Math.max(0, img.Size - (await derivedSize(typeof inputs.derivedImageId === 'string' ? inputs.derivedImageId : undefined))),
      createdAt: created,
      ...(used[key] ? { lastUsedAt: used[key] } : {}),
    });
  }
  return out.sort((a, b) => b.createdAt.localeCompare(a.createdAt));
}

/**
 * Removes prepared environments: all, or those not used (or made, when never used) for longer than
 * `olderThanMs`. `release` first drains the warm pool's sandboxes of those images; an image a
 * running sandbox uses stays (the engine refuses) and is reported.
 */
export async function prunePrepared(
  docker: Docker,
  usage: PreparedUsage,
  installation: string,
  opts: { olderThanMs?: number; now?: number; release?: (imageIds: string[]) => Promise<void> } = {},
): Promise<PruneResult> {
  const now = opts.now ?? Date.now();
  const all = await listPrepared(docker, usage, installation);
  const removed: PruneResult['removed'] = [];
  const kept: PruneResult['kept'] = [];
  const chosen = all.filter((p) => opts.olderThanMs === undefined || now - Date.parse(p.lastUsedAt ?? p.createdAt) >= opts.olderThanMs);
  // A started sandbox kept warm for the next run holds its image: it goes first (docs/architecture.md §16).
  await opts.release?.(chosen.map((p) => p.imageId));
  for (const p of chosen) {
    try {
      await docker.getImage(p.imageId).remove({ force: false });
      removed.push({ key: p.key, sizeBytes: p.sizeBytes });
    } catch (err) {
      kept.push({ key: p.key, reason: err instanceof Error ? err.message.slice(0, 300) : String(err) });
    }
  }
  await usage.forget(removed.map((r) => r.key));
  return { removed, kept, freedBytes: removed.reduce((n, r) => n + r.sizeBytes, 0) };
}

/** `30d`, `12h`, `90m`, `45s` → milliseconds; a clear error otherwise. */
export function parseAge(text: string): number {
  const m = /^(\d+)\s*(d|h|m|s)$/.exec(text.trim());
  if (!m) throw new AirlockError('INVALID_INPUT', `--older-than '${text}' is not an age; write a number and a unit: 30d, 12h, 90m or 45s.`, { field: 'olderThan' });
  const unit = { d: 86_400_000, h: 3_600_000, m: 60_000, s: 1000 }[m[2] as 'd' | 'h' | 'm' | 's'];
  return Number(m[1]) * unit;
}
