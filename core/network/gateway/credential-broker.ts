import { randomBytes } from 'node:crypto';
import type { Transform } from 'node:stream';
import { GATEWAY_PLACEHOLDER_PREFIX } from '../../common/command-env';
import { Emitter, type Disposable, type Event } from '../../common/disposable';
import { Secret } from '../../keys/secret';
import { hostMatches } from '../allowlist';
import type { HostCommandSecret, SecretFetchEvent } from './host-command-secret';
import { pathReadings } from './rules';
import { scrubPairs, ScrubStream, scrubString, type ScrubMode, type ScrubPair } from './secret-scrub';
import type { SecretBinding } from './secret-store';

/**
 * The per-run half of the credential broker (docs/architecture.md §2.8). Each chosen secret gets a
 * random placeholder; the sandbox sees only placeholders (in `GH_TOKEN`, npm's config, git's
 * credential helper). On the way out, the gateway calls `swap`: a placeholder toward a bound host
 * (and path) in one of the binding's forms is replaced by the value; a placeholder anywhere else
 * refuses the request. Responses from bound hosts pass `scrubber`, which replaces the value by the
 * placeholder should the upstream echo it. A secret whose value a host command prints is fetched
 * when a request first needs it (`swap` answers `fetch`, the gateway awaits `fetch()` and swaps
 * again) and refreshed once after a 401 (`refresh`).
 */
export interface BrokeredSecret {
  binding: SecretBinding;
  /** The stored value, or the host command that prints it when needed. */
  value: Secret<string> | HostCommandSecret;
}

export interface SwapResult {
  /** The rewritten headers (flat raw list), when nothing was refused. */
  headers: string[];
  /** The name of the secret injected, if any. */
  injected?: string;
}

export interface SwapRefusal {
  refused: string;
  /** The secret whose placeholder was misused. */
  secret: string;
}

/** The request needs a command secret's value that is not held yet: `fetch(secret)`, then swap again. */
export interface SwapNeedsValue {
  fetch: string;
}

interface Entry extends BrokeredSecret {
  placeholder: string;
}

export class CredentialBroker implements Disposable {
  private readonly entries: Entry[];
  private readonly forms = new WeakMap<Secret<string>, ScrubPair[]>();
  private readonly fetched = new Emitter<SecretFetchEvent>();
  private readonly subscriptions: Disposable[] = [];
  /** Every run of a command secret's command (never its value): for the run's audit. */
  readonly onDidFetch: Event<SecretFetchEvent> = this.fetched.event;

  constructor(secrets: BrokeredSecret[]) {
    this.entries = secrets.map((s) => ({ ...s, placeholder: `${GATEWAY_PLACEHOLDER_PREFIX}${s.binding.name}-${randomBytes(16).toString('hex')}` }));
    for (const e of this.entries) if (!(e.value instanceof Secret)) this.subscriptions.push(e.value.onDidFetch((f) => this.fetched.fire(f)));
  }

  dispose(): void {
    for (const s of this.subscriptions) s.dispose();
    for (const e of this.entries) if (!(e.value instanceof Secret)) e.value.dispose();
    this.fetched.dispose();
  }

  /** Fetches a command secret's value (a `SwapNeedsValue` answer); rejects with why it could not. */
  async fetch(name: string): Promise<void> {
    const source = this.entries.find((e) => e.binding.name === name)?.value;
    if (source && !(source instanceof Secret)) await source.get();
  }

  /** The value `swap` puts on requests for `name` right now (to hand back to `refresh` after a 401). */
  heldValue(name: string): Secret<string> | undefined {
    const source = this.entries.find((e) => e.binding.name === name)?.value;
    return source instanceof Secret ? source : source?.held();
  }

  /** Whether a 401 can be answered by fetching `name` again (a command secret). */
  refreshable(name: string): boolean {
    const source = this.entries.find((e) => e.binding.name === name)?.value;
    return source !== undefined && !(source instanceof Secret);
  }

  /**
   * After a 401 to a request that carried `stale`: a fresh value (the command runs again unless
   * another request already replaced the value), or undefined when it is the same value again.
   */
  async refresh(name: string, stale: Secret<string>): Promise<Secret<string> | undefined> {
    const source = this.entries.find((e) => e.binding.name === name)?.value;
    if (!source || source instanceof Secret) return undefined;
    const fresh = await source.refresh(stale);
    return fresh.reveal() === stale.reveal() ? undefined : fresh;
  }

  get names(): string[] {
    return this.entries.map((e) => e.binding.name);
  }

  /** Hosts the broker must see requests for (so they are intercepted). */
  covers(host: string): boolean {
    return this.entries.some((e) => e.binding.hosts.some((h) => hostMatches(h, host)));
  }

  /** Variables for every process in the sandbox: placeholders only. */
  env(): Record<string, string> {
    const env: Record<string, string> = {};
    for (const e of this.entries) for (const name of e.binding.env) env[name] = e.placeholder;
    return env;
  }

  /**
   * git configuration through the environment (no file in the sandbox holds it): a credential helper
   * that answers with the placeholder for the bound hosts, ahead of any other helper.
   */
  gitEnv(ports: (host: string) => number[]): Record<string, string> {
    const pairs: Array<[string, string]> = [];
    for (const e of this.entries) {
      if (!e.binding.git) continue;
      const basic = e.binding.forms.find((f) => f.type === 'basic');
      const user = basic?.type === 'basic' ? basic.username : 'x-access-token';
      for (const h of e.binding.hosts) {
        if (h.startsWith('*.')) continue;
        for (const port of ports(h)) {
          // git matches a credential URL's port exactly; an empty helper first resets inherited ones.
          const url = `https://${port === 443 ? h : `${h}:${port}`}`;
          pairs.push([`credential.${url}.helper`, '']);
          pairs.push([`credential.${url}.helper`, `!f() { test "$1" = get && printf 'username=${user}\\npassword=${e.placeholder}\\n'; }; f`]);
        }
      }
    }
    if (pairs.length === 0) return {};
    const env: Record<string, string> = { GIT_CONFIG_COUNT: String(pairs.length) };
    pairs.forEach(([k, v], i) => {
      env[`GIT_CONFIG_KEY_${i}`] = k;
      env[`GIT_CONFIG_VALUE_${i}`] = v;
    });
    return env;
  }

  /** Lines for a user `.npmrc` in the sandbox: the placeholder as the token of each bound registry. */
  npmrcLines(ports: (host: string) => number[]): string[] {
    const lines: string[] = [];
    for (const e of this.entries) {
      if (!e.binding.npm) continue;
      for (const h of e.binding.hosts) {
        if (h.startsWith('*.')) continue;
        for (const port of ports(h)) {
          lines.push(`//${port === 443 ? h : `${h}:${port}`}/:_authToken=${e.placeholder}`);
        }
      }
    }
    return lines;
  }

  /**
   * Rewrites a request's headers for `host` and `path`. Every header value is searched for every
   * placeholder; one found outside a bound host, path and form refuses the whole request.
   */
  swap(host: string, path: string, rawHeaders: string[]): SwapResult | SwapRefusal | SwapNeedsValue {
    const out = [...rawHeaders];
    let injected: string | undefined;
    for (let i = 0; i + 1 < out.length; i += 2) {
      const name = (out[i] as string).toLowerCase();
      let value = out[i + 1] as string;
      const decoded = name === 'authorization' ? decodeBasic(value) : undefined;
      for (const e of this.entries) {
        const inValue = value.includes(e.placeholder);
        const inBasic = decoded?.password.includes(e.placeholder) === true;
        if (!inValue && !inBasic) continue;
        if (!this.bound(e, host, path)) {
          return { refused: `the placeholder of secret "${e.binding.name}" was sent to ${host}, which it is not bound to`, secret: e.binding.name };
        }
        const held = e.value instanceof Secret ? e.value : e.value.held();
        if (!held) return { fetch: e.binding.name };
        const real = held.reveal();
        if (inBasic && decoded && e.binding.forms.some((f) => f.type === 'basic') && decoded.password === e.placeholder) {
          value = `Basic ${Buffer.from(`${decoded.user}:${real}`).toString('base64')}`;
        } else if (name === 'authorization' && e.binding.forms.some((f) => f.type === 'bearer') && /^(bearer|token) /i.test(value) && value.slice(value.indexOf(' ') + 1).trim() === e.placeholder) {
          value = `${value.slice(0, value.indexOf(' '))} ${real}`;
        } else if (e.binding.forms.some((f) => f.type === 'header' && f.name.toLowerCase() === name) && value.trim() === e.placeholder) {
          value = real;
        } else {
          return { refused: `the placeholder of secret "${e.binding.name}" is in the ${out[i]} header, which is not how it is sent`, secret: e.binding.name };
        }
        injected = e.binding.name;
      }
      out[i + 1] = value;
    }
    return injected ? { headers: out, injected } : { headers: out };
  }

  /** A placeholder in a URL (path or query) is never swapped: refuse, and name the secret. */
  inUrl(url: string): string | undefined {
    let decoded = url;
    try {
      decoded = decodeURIComponent(url);
    } catch {
      // keep the raw form
    }
    return this.entries.find((e) => url.includes(e.placeholder) || decoded.includes(e.placeholder))?.binding.name;
  }

  /**
   * A stream that replaces every form of every value bound to `host` (as given, inside base64,
   * percent- or JSON-encoded; secret-scrub.ts) by its placeholder — or, in `mask` mode, by as many
   * `*`, keeping lengths for an upgraded stream. Undefined when no secret is bound to the host.
   */
  scrubber(host: string, mode: ScrubMode = 'placeholder'): Transform | undefined {
    const pairs = this.pairsFor(this.entries.filter((e) => e.binding.hosts.some((h) => hostMatches(h, host))));
    return pairs.length ? new ScrubStream(pairs, mode) : undefined;
  }

  /** Replaces every form of every value by its placeholder in a header value or reason phrase. */
  scrubText(text: string): string {
    return scrubString(text, this.pairsFor(this.entries));
  }

  /**
   * Every form of each entry's values — a command secret's current one and every earlier one this
   * run held (a server may still echo a stale token) — computed once per value.
   */
  private pairsFor(entries: Entry[]): ScrubPair[] {
    const pairs: ScrubPair[] = [];
    for (const e of entries) {
      for (const value of e.value instanceof Secret ? [e.value] : e.value.values()) {
        let known = this.forms.get(value);
        if (!known) this.forms.set(value, (known = scrubPairs([{ value: value.reveal(), placeholder: e.placeholder }])));
        pairs.push(...known);
      }
    }
    return pairs.sort((a, b) => b.from.length - a.from.length);
  }

  private bound(e: Entry, host: string, path: string): boolean {
    if (!e.binding.hosts.some((h) => hostMatches(h, host))) return false;
    const prefixes = e.binding.pathPrefixes;
    if (!prefixes) return true;
    // Every way a server may read the path must stay under a prefix (`/me/../other` does not).
    const r = pathReadings(path);
    if ('unjudgeable' in r) return false;
    return r.readings.every((read) => prefixes.some((p) => read === p || read.startsWith(p.endsWith('/') ? p : `${p}/`)));
  }
}

function decodeBasic(value: string): { user: string; password: string } | undefined {
  const m = /^basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(value);
  if (!m) return undefined;
  const text = Buffer.from(m[1] as string, 'base64').toString('utf8');
  const colon = text.indexOf(':');
  return colon < 0 ? undefined : { user: text.slice(0, colon), password: text.slice(colon + 1) };
}
