import net from 'node:net';
import { AirlockError } from '../../contracts/errors';
import { rawHeaderValues } from '../common/hop-headers';
import { DEFAULT_PORT, toAllowEntry, type AllowEntry, type Allowlist, type EgressKind } from './allowlist';
import { blockedAddressReason, internalHostName, isIpLiteral, isLoopbackAddress, isPrivateAddress, normalizeHostName, reservedNameReason } from './address-checks';
import type { ProjectNetworkStore } from './project-network-store';
import { debugLog } from '../common/debug-log';

/**
 * The egress proxy's policy (docs/architecture.md §2.8): which names, ports and addresses a run may
 * reach, checked before anything is dialled — the allowlist, one-time grants, the project's remembered
 * hosts, and every resolved address (public only, or private for a host named as internal).
 */

/** Resolves a host name to its addresses (all of them: every one is checked). */
export type Resolver = (host: string) => Promise<string[]>;

/** A policy refusal or failure, answered to the client with a plain-text body. */
export class Refusal extends Error {
  constructor(
    readonly status: number,
    readonly reason: string,
    readonly body: string,
    readonly allowed = false,
    readonly address?: string,
  ) {
    super(reason);
  }
}

export const STATUS_TEXT: Record<number, string> = {
  400: 'Bad Request',
  403: 'Forbidden',
  408: 'Request Timeout',
  431: 'Request Header Fields Too Large',
  502: 'Bad Gateway',
  504: 'Gateway Timeout',
};

/** Splits `host:port` / `[v6]:port` / `host` (when a default port is given). */
/** Splits `host:port` / `[v6]:port` / `host` (when a default port is given). */
export function parseAuthority(text: string, defaultPort?: number): { host: string; port: number } | { error: string } {
  if (text.includes('@')) return { error: 'user information ("user@") in the target is not allowed' };
  if (/[\\\s/?#%]/.test(text)) return { error: 'the target contains characters a host name cannot have' };
  const bracket = /^(\[[^\]]*\])(?::(\d{1,5}))?$/.exec(text);
  const plain = /^([^:[\]]+)(?::(\d{1,5}))?$/.exec(text);
  const m = bracket ?? plain;
  if (!m) return { error: 'the target is not host:port' };
  const host = m[1] as string;
  if (m[2] === undefined) {
    return defaultPort === undefined ? { error: 'the target has no port' } : { host, port: defaultPort };
  }
  const port = Number(m[2]);
  if (port < 1 || port > 65535) return { error: `${m[2]} is not a valid port` };
  return { host, port };
}

function withTimeout<T>(p: Promise<T>, ms: number, message: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(message)), ms);
    p.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}

/**
 * A `Host` header that names another host than the request target is a smuggling attempt; so is
 * more than one `Host` header. Returns the reason, or undefined when consistent.
 */
export function hostHeaderMismatch(rawHeaders: string[], host: string, port: number, defaultPort: number): string | undefined {
  const values = rawHeaderValues(rawHeaders, 'host');
  if (values.length === 0) return undefined;
  if (values.length > 1) return 'more than one Host header';
  const parsed = parseAuthority((values[0] as string).trim(), defaultPort);
  if ('error' in parsed) return `the Host header is invalid (${parsed.error})`;
  const a = normalizeHostName(parsed.host) ?? parsed.host.toLowerCase();
  const b = normalizeHostName(host) ?? host.toLowerCase();
  if (a !== b || parsed.port !== port) return `the Host header (${values[0]}) does not match the request target (${host}:${port})`;
  return undefined;
}

export function asRefusal(err: unknown): Refusal {
  if (err instanceof Refusal) return err;
  return new Refusal(502, (err as Error).message, 'airlock: the egress proxy failed on this request', true);
}

/**
 * Why a name's resolved addresses may not be reached, or undefined. Any bad record refuses the name
 * (a rebinding answer must not win on a retry). A private (LAN) address passes only for a host the
 * user named as internal, and the refusal says how to name it; loopback, link-local and metadata
 * addresses are refused for every name (docs/architecture.md §2.8, "Internal hosts").
 */
export function addressRefusal(host: string, addresses: readonly string[], opts: { internal: boolean; allowLoopback?: boolean }): string | undefined {
  for (const address of addresses) {
    if (opts.allowLoopback && isLoopbackAddress(address)) continue;
    if (opts.internal && net.isIP(address) && isPrivateAddress(address)) continue;
    const blocked = net.isIP(address) ? blockedAddressReason(address) : 'not an IP address';
    if (!blocked) continue;
    const hint = !opts.internal && isPrivateAddress(address) ? `; if ${host} is a server of your own network, allow it by name with --internal-host ${host}` : '';
    return `resolves to ${blocked} (${address})${hint}`;
  }
  return undefined;
}

export interface EgressPolicyOptions {
  runId: string;
  resolve: Resolver;
  /** Time to resolve a name. */
  connectTimeoutMs: number;
  /** Tests only (see ALLOW_LOOPBACK_TARGETS_FOR_TESTS): loopback addresses pass. */
  allowLoopback: boolean;
  internalHosts: Iterable<string>;
  projectStore?: ProjectNetworkStore;
  allowCommand?: (host: string, port: number) => string;
}

/** How long a name's answer is reused: an install opens hundreds of connections to one registry in seconds. */
const LOOKUP_REUSE_MS = 5_000;
/** Names whose answers are kept at once (a run names few hosts; this only bounds a hostile one). */
const LOOKUP_CACHE_NAMES = 256;

/** The admission decision of one run's egress proxy, and the grants the user adds while it runs. */
export class EgressPolicy {
  private readonly onceGrants: Array<{ host: string; port?: number }> = [];
  /**
   * Lookups in flight or answered in the last LOOKUP_REUSE_MS, by name. Without it each connection
   * resolved on its own: an npm install's hundreds at once queued on the resolver's few threads past
   * the timeout (`DNS lookup timed out`, a 502). Every address is still checked on every decision.
   */
  private readonly lookups = new Map<string, { answer: Promise<string[]>; at?: number }>();
  private readonly internalHosts: Set<string>;
  private projectReload: Promise<void> | undefined;

  constructor(
    private readonly allowlist: Allowlist,
    private readonly opts: EgressPolicyOptions,
  ) {
    this.internalHosts = new Set([...opts.internalHosts].map(internalHostName));
  }

  /** The run's current allowlist. */
  entries(): AllowEntry[] {
    return this.allowlist.entries();
  }

  /** Admits the next single attempt to this host (on `port`, or the default port of the request kind). */
  allowOnce(host: string, port?: number): void {
    const entry = toAllowEntry(port === undefined ? host : { host, ports: [port] });
    if (entry.host.startsWith('*.')) throw new AirlockError('INVALID_INPUT', 'allow-once takes a host name, not a wildcard');
    this.onceGrants.push(port === undefined ? { host: entry.host } : { host: entry.host, port });
  }

  /** Adds an entry to this run's allowlist for the rest of the run. */
  allowForRun(entry: AllowEntry | string): AllowEntry {
    return this.allowlist.add(entry);
  }

  /** Persists the entry for the project (every later run starts with it) and allows it for this run. */
  async allowForProject(entry: AllowEntry | string): Promise<AllowEntry> {
    if (!this.opts.projectStore) {
      throw new AirlockError('INVALID_INPUT', 'this run has no project to remember hosts for; allow the host for the run instead');
    }
    const normalized = toAllowEntry(entry);
    await this.opts.projectStore.add(normalized);
    return this.allowlist.add(normalized);
  }

  denialText(host: string, port: number): string {
    const cmd = this.opts.allowCommand?.(host, port) ?? `airlock network allow ${host}:${port} --run ${this.opts.runId}`;
    return `airlock: ${host}:${port} is not on this run's allowlist — allow it from the run view or with \`${cmd}\``;
  }

  /**
   * The policy decision: checks the name, the allowlist, then resolves once and checks every
   * address. Returns the single address to connect to.
   */
  async decide(kind: EgressKind, rawHost: string, port: number): Promise<{ host: string; addresses: string[] }> {
    if (isIpLiteral(rawHost)) {
      throw new Refusal(
        403,
        'IP address literal',
        `airlock: ${rawHost}:${port} refused — IP addresses cannot be reached through the egress proxy; use an allow-listed host name`,
      );
    }
    const host = normalizeHostName(rawHost);
    if (!host) {
      throw new Refusal(403, 'not a valid host name', `airlock: "${rawHost}" is not a valid host name; refused`);
    }
    const reserved = reservedNameReason(host);
    if (reserved) throw new Refusal(403, reserved, `airlock: ${host}:${port} refused — ${reserved}`);

    const onceIndex = this.onceGrants.findIndex(
      (g) => g.host === host && (g.port === undefined ? port === DEFAULT_PORT[kind] : g.port === port),
    );
    if (onceIndex >= 0) {
      this.onceGrants.splice(onceIndex, 1);
    } else if (!this.allowlist.match(host, port, kind) && !(await this.matchesReloadedProject(host, port, kind))) {
      const reason = this.allowlist.hasHost(host)
        ? `port ${port} is not allowed for ${host}${kind === 'connect' ? ' (CONNECT)' : ' (plain HTTP)'}`
        : 'not on the allowlist';
      throw new Refusal(403, reason, this.denialText(host, port));
    }

    let addresses: string[];
    try {
      addresses = await withTimeout(this.lookup(host), this.opts.connectTimeoutMs, 'DNS lookup timed out');
    } catch (err) {
      const why = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
      throw new Refusal(502, `DNS lookup failed (${why})`, `airlock: could not resolve ${host} (${why})`, true);
    }
    if (addresses.length === 0) {
      throw new Refusal(502, 'DNS lookup returned no address', `airlock: ${host} has no address`, true);
    }
    const refused = addressRefusal(host, addresses, { internal: this.internalHosts.has(host), allowLoopback: this.opts.allowLoopback });
    if (refused) {
      const [what = refused, ...how] = refused.split('; ');
      throw new Refusal(403, refused, `airlock: ${host}:${port} refused — it ${what}, which the sandbox may not reach${how.length ? `; ${how.join('; ')}` : ''}`);
    }
    return { host, addresses };
  }

  /** One lookup per name at a time, its answer reused briefly; a failure is never reused. */
  private lookup(host: string): Promise<string[]> {
    const now = performance.now();
    const fresh = (e: { at?: number }) => e.at === undefined || now - e.at < LOOKUP_REUSE_MS;
    const known = this.lookups.get(host);
    if (known && fresh(known)) return known.answer;
    this.lookups.delete(host);
    if (this.lookups.size >= LOOKUP_CACHE_NAMES) {
      for (const [name, e] of this.lookups) if (!fresh(e)) this.lookups.delete(name);
    }
    const entry: { answer: Promise<string[]>; at?: number } = { answer: this.opts.resolve(host).then((addresses) => [...addresses]) };
    entry.answer.then(
      () => (entry.at = performance.now()),
      () => {
        if (this.lookups.get(host) === entry) this.lookups.delete(host);
      },
    );
    if (this.lookups.size < LOOKUP_CACHE_NAMES) this.lookups.set(host, entry);
    return entry.answer;
  }

  /**
   * Before refusing, re-reads the project's remembered hosts: `airlock network allow … --project`
   * (or `--run`) from another process then takes effect in this running run at once.
   */
  private async matchesReloadedProject(host: string, port: number, kind: EgressKind): Promise<boolean> {
    const store = this.opts.projectStore;
    if (!store) return false;
    this.projectReload ??= store
      .load()
      .then((entries) => {
        for (const e of entries) this.allowlist.add(e);
      })
      .catch(debugLog.swallow('egress.project.allowlist'))
      .finally(() => {
        this.projectReload = undefined;
      });
    await this.projectReload;
    return this.allowlist.match(host, port, kind) !== undefined;
  }
}
