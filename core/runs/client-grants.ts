import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, realpath, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { AirlockError } from '../../contracts/errors';
import { McpFolderRequest, type McpProjectGrant } from '../../contracts/mcp';
import type { NetworkPolicy } from '../../contracts/runs';
import type { Settings } from '../../contracts/settings';
import { AuditLog } from '../audit';
import { ownerStatus, PROCESS_OWNER } from '../common/process-alive';
import { debugLog } from '../common/debug-log';
import { ConsentRequests } from './consent-requests';

/**
 * What an MCP client may do, decided on the host (docs/architecture.md §17, "What a client may do"):
 * folders the user granted (Settings `mcpProjects`, `airlock mcp --project DIR`), any other asked in
 * the app or refused; never the home folder, its ancestors, system folders, Airlock's data or a
 * folder holding keys; the network at most what the user set for the project; secrets only those
 * granted; continuing only its own runs or granted ones. Every grant and refusal is audited.
 */

/** How long a client waits for the user's answer to a folder request. */
export const FOLDER_REQUEST_TTL_MS = 2 * 60_000;

/** Folders no client may ever have copied into a sandbox (inside them, or the folder itself). */
const SYSTEM_FOLDERS = ['/proc', '/sys', '/dev', '/etc', '/usr', '/var', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32', '/boot', '/run', '/srv', '/snap', '/System', '/Library', '/private', '/Applications', '/Volumes', '/cores'];
/** Entries whose presence at a folder's top means it is someone's home or key store, not a project. */
const KEY_ENTRIES = ['.ssh', '.gnupg', '.password-store', 'Library/Keychains', '.local/share/keyrings', '.pki'];
const KEYCHAIN_FILE = /\.(keychain|keychain-db)$/i;

/** Who asks: the client's own name (a claim, for display and the log) and its process-level grants. */
export interface ClientRef {
  /** "Claude Code 2.1.0", as the client named itself. */
  readonly name: string;
  /** `airlock mcp --project DIR…`: folders this server process may use, besides Settings. */
  readonly projects: readonly string[];
  /** Run ids this client started (it may continue them). */
  readonly runs: Set<string>;
  /** Folders the user said yes to for this client (asked once per connection). */
  readonly approved: Set<string>;
}

export function newClientRef(name: () => string, projects: () => readonly string[] = () => []): ClientRef {
  return {
    get name() {
      return name();
    },
    get projects() {
      return projects();
    },
    runs: new Set(),
    approved: new Set(),
  };
}

export interface ClientGrantsDeps {
  /** Airlock's data folder (never granted). */
  home: string;
  settings: { get(): Promise<Settings> };
  /** The user's home folder (default `os.homedir()`). */
  userHome?: string;
}

/** A folder a client may use, and what the user allowed there. */
export interface FolderGrant {
  /** The folder, resolved (symbolic links followed). */
  dir: string;
  /** How: listed in Settings, given with `--project`, or answered yes in the app. */
  via: 'settings' | 'flag' | 'user';
  grant: McpProjectGrant;
}

/** Why a folder can never be granted, or undefined. `dir` must be resolved. */
export async function forbiddenFolder(dir: string, opts: { home: string; userHome?: string }): Promise<string | undefined> {
  const userHome = await realpath(opts.userHome ?? os.homedir()).catch(() => path.resolve(opts.userHome ?? os.homedir()));
  const airlockHome = await realpath(opts.home).catch(() => path.resolve(opts.home));
  const tmp = await realpath(os.tmpdir()).catch(() => os.tmpdir());
  const within = (child: string, parent: string) => child === parent || child.startsWith(parent.endsWith(path.sep) ? parent : parent + path.sep);
  if (dir === path.parse(dir).root) return 'the root of the file system';
  if (within(userHome, dir)) return dir === userHome ? 'your home folder' : 'a folder that holds your home folder';
  if (within(dir, airlockHome) || within(airlockHome, dir)) return "Airlock's own data";
  // The system's temp folder sits under /var (or /private) on macOS: a project there is fine.
  if (!within(dir, tmp)) for (const sys of SYSTEM_FOLDERS) if (within(dir, sys)) return `a system folder (${sys})`;
  if (process.platform === 'win32' && /^[a-z]:\\(windows|program files|programdata)(\\|$)/i.test(dir)) return 'a system folder';
  for (const entry of KEY_ENTRIES) if (await stat(path.join(dir, entry)).then(() => true, () => false)) return `a folder holding ${entry}`;
  const names = await readdir(dir).catch(() => [] as string[]);
  const keychain = names.find((n) => KEYCHAIN_FILE.test(n));
  if (keychain) return `a folder holding a keychain (${keychain})`;
  return undefined;
}

/**
 * The app announces itself under `<home>/mcp/app.json` while it can ask the user; a client process
 * asks there, or refuses when no app is open. Dispose to withdraw.
 */
export async function announceApp(home: string): Promise<{ dispose(): Promise<void> }> {
  const file = path.join(home, 'mcp', 'app.json');
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  await writeFile(file, JSON.stringify({ owner: PROCESS_OWNER }), { mode: 0o600 });
  return {
    async dispose() {
      const now = await readFile(file, 'utf8').catch(() => '');
      if (now.includes(JSON.stringify(PROCESS_OWNER))) await rm(file, { force: true });
    },
  };
}

async function appIsOpen(home: string): Promise<boolean> {
  const text = await readFile(path.join(home, 'mcp', 'app.json'), 'utf8').catch(() => undefined); // no app.json: the app is not open
  if (!text) return false;
  try {
    const owner = (JSON.parse(text) as { owner?: unknown }).owner;
    const status = ownerStatus(typeof owner === 'string' ? owner : undefined);
    return status === 'self' || status === 'running';
  } catch {
    return false;
  }
}

/** The MCP folder requests the app answers (`mcp:folderRequests`, `mcp:answerFolder`). */
export class FolderRequests extends ConsentRequests<McpFolderRequest> {
  constructor(home: string) {
    super(home, 'folders', McpFolderRequest, 'mcp.folder');
  }
}

/**
 * Grants and refusals of one Airlock process, hash-chained under `<home>/mcp/grants/` (one log per
 * process: two processes never append to one chain).
 */
class GrantLog {
  private log: Promise<AuditLog> | undefined;
  constructor(private readonly home: string) {}
  note(event: 'granted' | 'refused' | 'asked', data: Record<string, unknown>): Promise<void> {
    this.log ??= AuditLog.open(path.join(this.home, 'mcp', 'grants', `${new Date().toISOString().replace(/[:.]/g, '-')}-${process.pid}-${randomBytes(3).toString('hex')}.jsonl`));
    const message = `MCP ${event}: ${String(data.what ?? '')}`;
    return this.log.then((l) => l.append('note', { message, event, ...data })).then(() => undefined, (err: unknown) => debugLog.note('mcp.grantLog', err));
  }
  async close(): Promise<void> {
    await (await this.log?.catch(debugLog.swallow('mcp.grantLog.open')))?.close().catch(debugLog.swallow('mcp.grantLog.close'));
  }
  get file(): Promise<string | undefined> {
    return this.log ? this.log.then((l) => l.file, () => undefined) : Promise.resolve(undefined);
  }
}

/** The host's rules for what an MCP client may do (see the module comment). */
export class ClientGrants {
  readonly folders: FolderRequests;
  private readonly log: GrantLog;

  constructor(private readonly deps: ClientGrantsDeps) {
    this.folders = new FolderRequests(deps.home);
    this.log = new GrantLog(deps.home);
  }

  /** The file this process audits grants and refusals in (once one was written). */
  get logFile(): Promise<string | undefined> {
    return this.log.file;
  }

  /** Records a grant or refusal decided elsewhere (an apply, say). */
  note(event: 'granted' | 'refused', client: ClientRef, data: Record<string, unknown>): Promise<void> {
    return this.log.note(event, { client: client.name, ...data });
  }

  private async refuse(client: ClientRef, what: string, data: Record<string, unknown>, message: string, field?: string): Promise<never> {
    await this.log.note('refused', { client: client.name, what, ...data });
    throw new AirlockError('FORBIDDEN', message, field ? { field } : undefined);
  }

  /**
   * The folder a client may use, resolved: granted in Settings or with `--project`, or — when an app
   * is open — asked there and answered yes. Refused (FORBIDDEN) otherwise, and always for the home
   * folder, its ancestors, system folders, Airlock's data and folders holding keys. A folder that
   * does not exist is INVALID_INPUT before anything is recorded.
   */
  async folder(client: ClientRef, projectDir: string, opts: { purpose: 'sandbox' | 'run'; signal?: AbortSignal; waitMs?: number }): Promise<FolderGrant> {
    if (!path.isAbsolute(projectDir)) throw new AirlockError('INVALID_INPUT', `projectDir must be an absolute path on this machine (got ${JSON.stringify(projectDir.slice(0, 200))}).`, { field: 'projectDir' });
    const dir = await realpath(projectDir).catch(() => undefined); // does not exist: INVALID_INPUT below
    const isDir = dir ? await stat(dir).then((s) => s.isDirectory(), () => false) : false;
    if (!dir || !isDir) throw new AirlockError('INVALID_INPUT', `${projectDir} is not a folder on this machine; pass the absolute path of a project folder.`, { field: 'projectDir' });
    const why = await forbiddenFolder(dir, this.deps);
    if (why) return this.refuse(client, 'folder', { dir, reason: why }, `${dir} is ${why}: Airlock never copies it into a sandbox for an MCP client. Pass a project folder.`, 'projectDir');
    const found = await this.grantFor(client, dir);
    if (found) {
      await this.log.note('granted', { client: client.name, what: 'folder', dir, via: found.via, grantDir: found.grant.dir, purpose: opts.purpose });
      return found;
    }
    if (client.approved.has(dir)) return { dir, via: 'user', grant: { dir } };
    if (!(await appIsOpen(this.deps.home))) {
      return this.refuse(client, 'folder', { dir, reason: 'not granted, no app open' }, `${dir} is not a folder the user granted MCP clients, and no Airlock app is open to ask. The user grants it in Airlock (Settings → MCP → Project folders), or starts the server with 'airlock mcp --project ${dir}'.`, 'projectDir');
    }
    const req = await this.folders.request({ client: client.name, projectDir: dir, purpose: opts.purpose }, opts.waitMs ?? FOLDER_REQUEST_TTL_MS);
    await this.log.note('asked', { client: client.name, what: 'folder', dir, requestId: req.requestId });
    const answer = await this.folders.wait(req.requestId, opts.signal);
    if (answer !== 'approved') {
      return this.refuse(client, 'folder', { dir, reason: answer === 'refused' ? 'the user said no' : 'no answer', requestId: req.requestId }, answer === 'refused' ? `The user refused ${client.name} access to ${dir}.` : `The user did not answer the request for ${dir} in Airlock in time; nothing was made. Ask again, or have the user grant it in Settings → MCP.`, 'projectDir');
    }
    client.approved.add(dir);
    await this.log.note('granted', { client: client.name, what: 'folder', dir, via: 'user', requestId: req.requestId, purpose: opts.purpose });
    return { dir, via: 'user', grant: { dir } };
  }

  /** The network a client asked for, checked against the project's grant: `none` always; an allowlist within the grant's; `open` only with the grant's `openNetwork`. */
  async network(client: ClientRef, folder: FolderGrant, network: NetworkPolicy, allow: readonly string[] = []): Promise<void> {
    if (network === 'none') return;
    if (network === 'open') {
      if (folder.grant.openNetwork) return void (await this.log.note('granted', { client: client.name, what: 'network open', dir: folder.dir }));
      return this.refuse(client, 'network open', { dir: folder.dir }, `network "open" is not allowed for MCP clients in ${folder.dir}. The user allows it in Airlock (Settings → MCP → Project folders → open network); otherwise use "none", or "allowlist" with domains the user listed there.`, 'network');
    }
    const granted = new Set((folder.grant.allow ?? []).map((d) => d.toLowerCase()));
    const outside = allow.filter((d) => !granted.has(d.toLowerCase()));
    if (outside.length) {
      return this.refuse(client, 'network allowlist', { dir: folder.dir, outside }, `${outside.slice(0, 10).join(', ')} ${outside.length === 1 ? 'is' : 'are'} not in the allowlist the user set for MCP clients in ${folder.dir}${granted.size ? ` (${[...granted].slice(0, 20).join(', ')})` : ' (none)'}. The user adds domains in Airlock (Settings → MCP → Project folders).`, 'allow');
    }
    await this.log.note('granted', { client: client.name, what: 'network allowlist', dir: folder.dir, allow: [...allow] });
  }

  /** Gateway secrets: none unless the project's grant names them. */
  async secrets(client: ClientRef, folder: FolderGrant, names: readonly string[]): Promise<void> {
    const granted = new Set(folder.grant.secrets ?? []);
    const outside = names.filter((n) => !granted.has(n));
    if (outside.length) return this.refuse(client, 'secrets', { dir: folder.dir, outside }, `The secret(s) ${outside.join(', ')} are not granted to MCP clients in ${folder.dir}. The user grants them in Airlock (Settings → MCP → Project folders).`, 'secrets');
  }

  /**
   * A follow-up of a run: only runs this client started, or runs of a project whose grant has
   * `continueRuns`; the parent's secrets and network must be within the grant too.
   */
  async continuation(client: ClientRef, parent: { id: string; projectDir: string; network: NetworkPolicy; allowlist?: string[] | undefined; secrets?: string[] | undefined; internalHosts?: string[] | undefined }): Promise<void> {
    const dir = await realpath(parent.projectDir).catch(() => parent.projectDir);
    // A grant has no internal hosts: reaching the user's LAN stays the user's own choice, run by run.
    if (parent.internalHosts?.length) {
      return this.refuse(client, 'run_continue', { runId: parent.id, dir, internalHosts: parent.internalHosts }, `Run ${parent.id} reaches internal hosts (${parent.internalHosts.slice(0, 10).join(', ')}); MCP clients cannot continue it. Continue it in Airlock or with \`airlock run --continue ${parent.id}\`.`, 'runId');
    }
    const found = await this.grantFor(client, dir);
    const own = client.runs.has(parent.id);
    if (!own && !found?.grant.continueRuns) {
      return this.refuse(client, 'run_continue', { runId: parent.id, dir }, `Run ${parent.id} was not started by this client, and the user has not let MCP clients continue runs of ${dir} (Settings → MCP → Project folders → continue runs). Continue a run this client started, or start one with run_start.`, 'runId');
    }
    const folder = found ?? { dir, via: 'user' as const, grant: { dir } };
    await this.network(client, folder, parent.network, parent.allowlist ?? []);
    await this.secrets(client, folder, parent.secrets ?? []);
    await this.log.note('granted', { client: client.name, what: 'run_continue', runId: parent.id, dir, own });
  }

  /** Whether `--allow-apply` may write into this folder without asking: only a granted one (Settings or `--project`). */
  async grantedFolder(client: ClientRef, projectDir: string): Promise<boolean> {
    const dir = await realpath(projectDir).catch(() => undefined); // does not exist: no grant
    return !!dir && !(await forbiddenFolder(dir, this.deps)) && !!(await this.grantFor(client, dir));
  }

  async dispose(): Promise<void> {
    await this.log.close();
  }

  /** The closest grant holding `dir` (Settings first, then `--project`). */
  private async grantFor(client: ClientRef, dir: string): Promise<FolderGrant | undefined> {
    const settings = await this.deps.settings.get();
    const candidates: Array<{ grant: McpProjectGrant; via: 'settings' | 'flag' }> = [...(settings.mcpProjects ?? []).map((grant) => ({ grant, via: 'settings' as const })), ...client.projects.map((p) => ({ grant: { dir: p }, via: 'flag' as const }))];
    let best: (FolderGrant & { depth: number }) | undefined;
    for (const c of candidates) {
      if (!path.isAbsolute(c.grant.dir)) continue;
      const real = await realpath(c.grant.dir).catch(() => undefined); // a granted folder that is gone grants nothing
      if (!real || !(dir === real || dir.startsWith(real.endsWith(path.sep) ? real : real + path.sep))) continue;
      if (!best || real.length > best.depth) best = { dir, via: c.via, grant: c.grant, depth: real.length };
    }
    return best ? { dir: best.dir, via: best.via, grant: best.grant } : undefined;
  }
}

/**
 * A cap counted synchronously: `take()` reserves before any await, so concurrent callers cannot all
 * pass the check (8 concurrent creates with a cap of 4 make 4). Release what was taken.
 */
export class SlotCap {
  private used = 0;
  constructor(readonly cap: number) {}
  get count(): number {
    return this.used;
  }
  /** A slot, or undefined when all are taken. The release is idempotent. */
  take(): (() => void) | undefined {
    if (this.used >= this.cap) return undefined;
    this.used += 1;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.used -= 1;
    };
  }
}
