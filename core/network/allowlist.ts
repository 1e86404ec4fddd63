import { z } from 'zod';
import { AirlockError } from '../../contracts/errors';
import { isIpLiteral, normalizeHostName } from './address-checks';

/**
 * One allow-list entry: an exact host name (`registry.example.test`) or a wildcard that matches
 * subdomains only (`*.example.test` matches `a.example.test`, not `example.test`), with optional
 * ports. Without ports, HTTPS `CONNECT` may use 443 and plain HTTP may use 80.
 */
export interface AllowEntry {
  host: string;
  ports?: number[];
}

export const AllowEntrySchema = z
  .object({
    host: z.string().min(1).max(260),
    ports: z.array(z.number().int().min(1).max(65535)).min(1).max(64).optional(),
  })
  .strict();

/** How a request reaches the proxy: a `CONNECT` tunnel (HTTPS, anything TLS) or plain HTTP. */
export type EgressKind = 'connect' | 'http';

export const DEFAULT_PORT: Record<EgressKind, number> = { connect: 443, http: 80 };

function invalid(message: string): AirlockError {
  return new AirlockError('INVALID_INPUT', message);
}

/** Validates and normalizes an entry's host pattern; throws a typed error that says what to write instead. */
export function normalizeHostPattern(raw: string): string {
  const text = raw.trim();
  const wildcard = text.startsWith('*.');
  const rest = wildcard ? text.slice(2) : text;
  if (rest.includes('*')) {
    throw invalid(`"${raw}": a wildcard may only be a leading "*." (for example *.example.com)`);
  }
  if (isIpLiteral(rest)) {
    throw invalid(`"${raw}": IP addresses cannot be allow-listed; add the host name the tool uses instead`);
  }
  const host = normalizeHostName(rest);
  if (!host) {
    throw invalid(`"${raw}" is not a valid host name (letters, digits, "-" and dots; no scheme, user or path)`);
  }
  if (wildcard && !host.includes('.')) {
    throw invalid(`"${raw}" is too broad: a wildcard needs at least two labels (use the "open" policy for full egress)`);
  }
  return wildcard ? `*.${host}` : host;
}

/**
 * Parses the text form users type: `host`, `host:port`, `host:443,8443`, `*.example.com`, or a URL
 * (`https://registry.example.com/some/path` → that host on the URL's port).
 */
export function parseAllowEntry(text: string): AllowEntry {
  const raw = text.trim();
  if (raw.length === 0) throw invalid('an allow-list entry cannot be empty');
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(raw)) {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw invalid(`"${raw}" is not a valid URL`);
    }
    if (url.username || url.password) throw invalid(`"${raw}": remove the user name/password from the URL`);
    const host = normalizeHostPattern(url.hostname);
    const port = url.port ? Number(url.port) : url.protocol === 'http:' ? 80 : 443;
    return { host, ports: [port] };
  }
  const m = /^([^:]+)(?::([0-9,\s]+))?$/.exec(raw);
  if (!m) throw invalid(`"${raw}": write host, host:port or host:port1,port2`);
  const host = normalizeHostPattern(m[1] as string);
  if (m[2] === undefined) return { host };
  const ports = m[2]
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p.length > 0)
    .map((p) => {
      const n = Number(p);
      if (!Number.isInteger(n) || n < 1 || n > 65535) throw invalid(`"${raw}": ${p} is not a port (1-65535)`);
      return n;
    });
  if (ports.length === 0) throw invalid(`"${raw}": write at least one port after ":"`);
  return { host, ports: [...new Set(ports)].sort((a, b) => a - b) };
}

/** Accepts either form and returns a normalized entry. */
export function toAllowEntry(entry: AllowEntry | string): AllowEntry {
  if (typeof entry === 'string') return parseAllowEntry(entry);
  const parsed = AllowEntrySchema.parse(entry);
  const host = normalizeHostPattern(parsed.host);
  return parsed.ports ? { host, ports: [...new Set(parsed.ports)].sort((a, b) => a - b) } : { host };
}

/** The text form, for records and the UI: `host` or `host:443,8443`. */
export function formatAllowEntry(entry: AllowEntry): string {
  return entry.ports ? `${entry.host}:${entry.ports.join(',')}` : entry.host;
}

/** True when the (normalized) host name matches the entry's pattern. */
export function hostMatches(pattern: string, host: string): boolean {
  if (pattern.startsWith('*.')) {
    const suffix = pattern.slice(1); // ".example.com"
    return host.length > suffix.length && host.endsWith(suffix);
  }
  return pattern === host;
}

/** True when the entry admits this port for this kind of request. */
export function portMatches(entry: AllowEntry, port: number, kind: EgressKind): boolean {
  return entry.ports ? entry.ports.includes(port) : port === DEFAULT_PORT[kind];
}

/** A mutable, de-duplicated set of entries. */
export class Allowlist {
  private readonly items = new Map<string, AllowEntry>();

  constructor(entries: Iterable<AllowEntry | string> = []) {
    for (const e of entries) this.add(e);
  }

  /** Adds an entry (merging ports with an existing entry for the same pattern); returns the stored entry. */
  add(entry: AllowEntry | string): AllowEntry {
    const e = toAllowEntry(entry);
    const existing = this.items.get(e.host);
    let merged: AllowEntry;
    if (!existing) merged = e;
    else if (!existing.ports && !e.ports) merged = existing;
    else {
      // Merging "host" (default ports) with "host:8443" keeps the defaults explicit.
      const ports = new Set<number>([
        ...(existing.ports ?? [DEFAULT_PORT.connect, DEFAULT_PORT.http]),
        ...(e.ports ?? [DEFAULT_PORT.connect, DEFAULT_PORT.http]),
      ]);
      merged = { host: e.host, ports: [...ports].sort((a, b) => a - b) };
    }
    this.items.set(e.host, merged);
    return merged;
  }

  /** The first entry admitting this host, port and kind. */
  match(host: string, port: number, kind: EgressKind): AllowEntry | undefined {
    for (const e of this.items.values()) {
      if (hostMatches(e.host, host) && portMatches(e, port, kind)) return e;
    }
    return undefined;
  }

  /** True when some entry names this host, whatever the port (to explain a port denial). */
  hasHost(host: string): boolean {
    for (const e of this.items.values()) if (hostMatches(e.host, host)) return true;
    return false;
  }

  entries(): AllowEntry[] {
    return [...this.items.values()].map((e) => (e.ports ? { host: e.host, ports: [...e.ports] } : { host: e.host }));
  }
}
