import { AirlockError } from '../../../contracts/errors';
import { hostMatches, normalizeHostPattern } from '../allowlist';

/**
 * Method and path rules for intercepted hosts (docs/architecture.md §2.8). A rule is written as one
 * line, the same in the CLI, the run form, the project's policy file and the records:
 *
 * - `HOST allow|deny [METHODS] [PATH-GLOB]` — `api.github.com deny DELETE`, `api.github.com allow GET,POST /repos/me/**`
 * - `HOST read-only` — GET, HEAD and OPTIONS (and git's fetch, which is a read sent as POST)
 * - `HOST git-fetch` — git may fetch and clone; push is refused; other requests pass
 * - `HOST git-push=PREFIX` — fetch, and push only to branches `refs/heads/PREFIX…`
 *
 * Rules of a host are tried in order; the first that matches the request decides. A request no rule
 * matches is refused when the host has any rule that allows (an allow rule is a list of what may
 * pass), and let through when it has only deny rules.
 */
export type RuleKind = 'allow' | 'deny' | 'read-only' | 'git-fetch' | 'git-push';

export interface GatewayRule {
  host: string;
  kind: RuleKind;
  /** Upper-case methods; undefined = any. */
  methods?: string[];
  /** Path glob (`*` within a segment, `**` across segments); undefined = any path. */
  path?: string;
  /** `git-push` only: the branch prefix pushes must stay under. */
  pushPrefix?: string;
  /** The rule as written (normalized), for denials and records. */
  text: string;
}

/** What a request is, as far as rules are concerned. The query string is not part of `path`. */
export interface RuleRequest {
  host: string;
  method: string;
  path: string;
  query: string;
}

export interface RuleDecision {
  allowed: boolean;
  /** The deciding rule's text, or a description of the default. */
  rule: string;
  reason: string;
  /** For an allowed push: every updated ref must be under `refs/heads/<prefix>` (checked on the body). */
  pushPrefix?: string;
  /** Refused by the project's policy file (which can only tighten: the user is not asked to override it). */
  byProject?: true;
}

const METHOD = /^[A-Z]{3,10}$/;
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

function invalid(message: string): AirlockError {
  return new AirlockError('INVALID_INPUT', message);
}

/** Parses one rule line; throws INVALID_INPUT saying what to write instead. */
export function parseRule(line: string): GatewayRule {
  const words = line.trim().split(/\s+/).filter(Boolean);
  const usage = 'write "HOST allow|deny [METHODS] [/path/glob]", "HOST read-only", "HOST git-fetch" or "HOST git-push=PREFIX"';
  if (words.length < 2) throw invalid(`"${line}": ${usage}`);
  const host = normalizeHostPattern(words[0] as string);
  const verb = (words[1] as string).toLowerCase();
  const rest = words.slice(2);
  if (verb === 'read-only' || verb === 'git-fetch') {
    if (rest.length) throw invalid(`"${line}": ${verb} takes nothing after it`);
    return { host, kind: verb, text: `${host} ${verb}` };
  }
  if (verb.startsWith('git-push=')) {
    const prefix = words[1]!.slice('git-push='.length);
    // A ref name component cannot hold these (git check-ref-format); keeps the check exact.
    if (!prefix || /[\s~^:?*[\\]|\.\.|@\{|^\/|\/\/|^refs\//.test(prefix)) {
      throw invalid(`"${line}": git-push= needs a branch prefix such as agent/ (without refs/heads/)`);
    }
    if (rest.length) throw invalid(`"${line}": git-push=PREFIX takes nothing after it`);
    return { host, kind: 'git-push', pushPrefix: prefix, text: `${host} git-push=${prefix}` };
  }
  if (verb !== 'allow' && verb !== 'deny') throw invalid(`"${line}": unknown rule "${words[1]}"; ${usage}`);
  let methods: string[] | undefined;
  let pathGlob: string | undefined;
  for (const w of rest) {
    if (w.startsWith('/')) {
      if (pathGlob) throw invalid(`"${line}": one path glob per rule`);
      pathGlob = w;
    } else {
      if (methods) throw invalid(`"${line}": list methods once, comma-separated (GET,POST)`);
      methods = w.split(',').map((m) => m.trim().toUpperCase());
      const bad = methods.find((m) => !METHOD.test(m));
      if (bad !== undefined) throw invalid(`"${line}": "${bad}" is not an HTTP method (paths start with /)`);
    }
  }
  const text = [host, verb, methods?.join(','), pathGlob].filter(Boolean).join(' ');
  return { host, kind: verb, ...(methods ? { methods } : {}), ...(pathGlob ? { path: pathGlob } : {}), text };
}

/** `*` matches within one path segment, `**` across segments; everything else literally. */
export function globToRegExp(glob: string): RegExp {
  let re = '';
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i] as string;
    if (c === '*') {
      if (glob[i + 1] === '*') {
        re += '.*';
        i++;
      } else re += '[^/]*';
    } else re += c.replace(/[.+?^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(`^${re}$`);
}

/** Which git smart-HTTP service a request belongs to, if any. */
export function gitService(req: Pick<RuleRequest, 'method' | 'path' | 'query'>): 'upload-pack' | 'receive-pack' | undefined {
  if (req.method === 'GET' && req.path.endsWith('/info/refs')) {
    const service = new URLSearchParams(req.query).get('service');
    if (service === 'git-upload-pack') return 'upload-pack';
    if (service === 'git-receive-pack') return 'receive-pack';
    return undefined;
  }
  if (req.method === 'POST' && req.path.endsWith('/git-upload-pack')) return 'upload-pack';
  if (req.method === 'POST' && req.path.endsWith('/git-receive-pack')) return 'receive-pack';
  return undefined;
}

/** Resolves `.` and `..` segments of a path split on `/` (`..` above the root stays at the root). */
function resolveDots(path: string): string {
  const out: string[] = [];
  for (const seg of path.split('/')) {
    if (seg === '..') {
      if (out.length > 1) out.pop();
    } else if (seg !== '.') out.push(seg);
  }
  const joined = out.join('/');
  return joined.startsWith('/') ? joined : `/${joined}`;
}

/** Collapses repeated slashes and drops `;parameters` from every segment (Tomcat, Jetty, Spring read `/a;x` as `/a`). */
function fold(path: string): string {
  const segs = path.split('/').map((seg) => {
    const semi = seg.indexOf(';');
    return semi < 0 ? seg : seg.slice(0, semi);
  });
  return resolveDots(segs.join('/').replace(/\/{2,}/g, '/'));
}

/** `%2F`, `%5C` and `%25` stay encoded; every other escape is decoded (what every server decodes). */
const KEPT_ESCAPE = /(%2[fF]|%5[cC]|%25)/;

/**
 * The ways a server may read a raw request path (docs/architecture.md §2.8), each decoded, with dot
 * segments resolved: as written (`%2F`, `%5C`, `%25` kept encoded); folded (slashes collapsed,
 * `;parameters` dropped); and with encoded `/` and `\`, `\` itself and a second round of
 * percent-decoding read as separators. A rule decides a request only when every reading (case kept
 * and ignored) agrees it passes. Returns why a path cannot be judged (a bad escape, a control byte).
 */
export function pathReadings(raw: string): { readings: string[] } | { unjudgeable: string } {
  if (/%(?![0-9a-fA-F]{2})/.test(raw)) return { unjudgeable: 'the path has a % that is not a percent-escape' };
  let literal: string;
  try {
    literal = raw
      .split(KEPT_ESCAPE)
      .map((piece, i) => (i % 2 === 1 ? piece.toUpperCase() : decodeURIComponent(piece)))
      .join('');
  } catch {
    return { unjudgeable: 'the path decodes to bytes that are not UTF-8' };
  }
  // Control bytes (NUL, CR, LF, …) read differently from server to server.
  if (/[\u0000-\u001f\u007f]/.test(literal)) return { unjudgeable: 'the path holds a control character' };
  let separated = literal.replace(/%25/g, '%');
  try {
    // A second round: `%252F` reaches a server that decodes twice as `/`.
    separated = decodeURIComponent(separated.replace(/%(?![0-9a-fA-F]{2})/g, '%25'));
  } catch {
    return { unjudgeable: 'the path decodes (twice) to bytes that are not UTF-8' };
  }
  if (/[\u0000-\u001f\u007f]/.test(separated)) return { unjudgeable: 'the path holds an encoded control character' };
  separated = separated.replace(/\\/g, '/');
  const readings = [resolveDots(literal), fold(resolveDots(literal)), fold(separated)];
  return { readings: [...new Set(readings)] };
}

/**
 * The path as written, decoded, dot segments resolved (`%2F`, `%5C`, `%25` kept encoded): the form
 * shown to the user and used for "Allow for this project".
 */
export function canonicalPath(raw: string): string {
  const r = pathReadings(raw);
  return 'readings' in r ? (r.readings[0] as string) : raw;
}

interface CompiledRule {
  rule: GatewayRule;
  path?: RegExp;
  /** The same glob, case ignored (servers such as IIS and Express's default router fold case). */
  pathFolded?: RegExp;
}

function compile(rule: GatewayRule): CompiledRule {
  if (!rule.path) return { rule };
  const re = globToRegExp(rule.path);
  return { rule, path: re, pathFolded: new RegExp(re.source, 'i') };
}

/** Outcome of one rule for a request: undefined when it does not apply. */
function apply(c: CompiledRule, req: RuleRequest, path: string, ignoreCase: boolean): RuleDecision | undefined {
  const { rule } = c;
  const git = gitService({ ...req, path });
  switch (rule.kind) {
    case 'read-only': {
      const ok = SAFE_METHODS.has(req.method) || git === 'upload-pack';
      if (git === 'receive-pack') return { allowed: false, rule: rule.text, reason: 'git push is refused (read-only)' };
      return ok
        ? { allowed: true, rule: rule.text, reason: 'read-only allows it' }
        : { allowed: false, rule: rule.text, reason: `${req.method} is not allowed (read-only: GET, HEAD, OPTIONS and git fetch)` };
    }
    case 'git-fetch':
      return git === 'receive-pack'
        ? { allowed: false, rule: rule.text, reason: 'git push is refused (git-fetch: fetch and clone only)' }
        : { allowed: true, rule: rule.text, reason: 'git-fetch allows it' };
    case 'git-push':
      // The ref updates are in the POST's body; the GET that discovers refs before it carries none.
      return git === 'receive-pack' && req.method === 'POST'
        ? { allowed: true, rule: rule.text, reason: `push allowed to branches under ${rule.pushPrefix}`, pushPrefix: rule.pushPrefix as string }
        : { allowed: true, rule: rule.text, reason: 'git-push allows it' };
    default: {
      if (rule.methods && !rule.methods.includes(req.method)) return undefined;
      const re = ignoreCase ? c.pathFolded : c.path;
      if (re && !re.test(path)) return undefined;
      return { allowed: rule.kind === 'allow', rule: rule.text, reason: rule.kind === 'allow' ? 'allowed by rule' : 'refused by rule' };
    }
  }
}

/** An ordered rule list; `decide` never throws. */
export class RuleSet {
  private readonly compiled: CompiledRule[];

  constructor(rules: Iterable<GatewayRule | string>) {
    this.compiled = [...rules].map((r) => compile(typeof r === 'string' ? parseRule(r) : r));
  }

  /** Puts rules first (an approval the user gave while the run goes on decides before the rule that refused). */
  prepend(...rules: GatewayRule[]): void {
    this.compiled.unshift(...rules.map(compile));
  }

  get rules(): GatewayRule[] {
    return this.compiled.map((c) => c.rule);
  }

  /** True when some rule names this host (so its traffic must be intercepted to be judged). */
  covers(host: string): boolean {
    return this.compiled.some((c) => hostMatches(c.rule.host, host));
  }

  /**
   * The decision for a request, or undefined when no rule names the host. The path is judged as
   * every server might read it (`pathReadings`, case kept and ignored): it passes only when every
   * reading passes; the first reading refused decides, and the reason says how it was read.
   */
  decide(req: RuleRequest): RuleDecision | undefined {
    const mine = this.compiled.filter((c) => hostMatches(c.rule.host, req.host));
    if (mine.length === 0) return undefined;
    const r = pathReadings(req.path);
    if ('unjudgeable' in r) return { allowed: false, rule: `paths on ${req.host} are judged as servers read them`, reason: `${r.unjudgeable}, so it cannot be judged` };
    const written = r.readings[0] as string;
    let first: RuleDecision | undefined;
    let pushPrefix: string | undefined;
    for (const path of r.readings) {
      for (const ignoreCase of [false, true]) {
        const d = this.decideOne(mine, req, path, ignoreCase);
        if (!d.allowed) {
          if (path === written && !ignoreCase) return d;
          const how = `${path === written ? '' : ` read as ${path}`}${ignoreCase ? `${path === written ? '' : ','} with case ignored` : ''}`;
          return { ...d, reason: `${d.reason} (${written}${how}, as a server may read it)` };
        }
        first ??= d;
        if (d.pushPrefix && (!pushPrefix || d.pushPrefix.length > pushPrefix.length)) pushPrefix = d.pushPrefix;
      }
    }
    const d = first as RuleDecision;
    return pushPrefix ? { ...d, pushPrefix } : d;
  }

  private decideOne(mine: CompiledRule[], req: RuleRequest, path: string, ignoreCase: boolean): RuleDecision {
    for (const c of mine) {
      const d = apply(c, req, path, ignoreCase);
      if (d) return d;
    }
    if (mine.some((c) => c.rule.kind !== 'deny')) {
      return { allowed: false, rule: `no rule for ${req.host} matches`, reason: `no rule allows ${req.method} ${path}` };
    }
    return { allowed: true, rule: `no rule for ${req.host} matches`, reason: 'only deny rules, none matched' };
  }
}

/**
 * The user's rules, tightened by the project's policy file: a request passes only when both allow
 * it. A project rule can refuse what the user allows, never admit what the user refuses, and never
 * add a host (the allowlist is the user's alone).
 */
export function decideWithProject(user: RuleSet, project: RuleSet | undefined, req: RuleRequest): RuleDecision | undefined {
  const u = user.decide(req);
  if (u && !u.allowed) return u;
  const p = project?.decide(req);
  if (p && !p.allowed) return { ...p, rule: `${p.rule} (project policy)`, byProject: true };
  if (u && p?.pushPrefix && u.pushPrefix && !p.pushPrefix.startsWith(u.pushPrefix) && !u.pushPrefix.startsWith(p.pushPrefix)) {
    return { allowed: false, rule: `${p.rule} (project policy)`, reason: 'the project and user push prefixes do not overlap', byProject: true };
  }
  if (u) {
    // The narrower of two push prefixes wins.
    const prefix = [u.pushPrefix, p?.pushPrefix].filter((x): x is string => !!x).sort((a, b) => b.length - a.length)[0];
    return prefix ? { ...u, pushPrefix: prefix } : u;
  }
  return p ? { ...p, rule: `${p.rule} (project policy)` } : undefined;
}

/** One ref update in a receive-pack request. */
export interface RefUpdate {
  oldId: string;
  newId: string;
  ref: string;
}

/**
 * Reads the ref-update commands at the start of a git receive-pack request body (pkt-lines up to
 * the first flush-pkt). Returns undefined while more bytes are needed; throws on a malformed body.
 */
export function parseRefUpdates(buf: Buffer): { updates: RefUpdate[]; capabilities: string[]; end: number } | undefined {
  const updates: RefUpdate[] = [];
  let capabilities: string[] = [];
  let at = 0;
  for (;;) {
    if (buf.length < at + 4) return undefined;
    const lenText = buf.subarray(at, at + 4).toString('latin1');
    if (!/^[0-9a-f]{4}$/i.test(lenText)) throw new Error('not a git pkt-line');
    const len = parseInt(lenText, 16);
    if (len === 0) return { updates, capabilities, end: at + 4 };
    if (len < 4) throw new Error('unexpected special pkt-line among ref updates');
    if (buf.length < at + len) return undefined;
    let line = buf.subarray(at + 4, at + len).toString('utf8');
    at += len;
    const nul = line.indexOf('\0');
    if (nul >= 0) {
      if (updates.length === 0) capabilities = line.slice(nul + 1).trim().split(' ');
      line = line.slice(0, nul);
    }
    line = line.replace(/\n$/, '');
    // `push-cert` blocks and shallow lines are not ref updates; git sends neither for a plain push.
    const m = /^([0-9a-f]{40,64}) ([0-9a-f]{40,64}) (\S+)$/.exec(line);
    if (!m) throw new Error(`unexpected command in a push: ${line.slice(0, 80)}`);
    updates.push({ oldId: m[1] as string, newId: m[2] as string, ref: m[3] as string });
  }
}

/** Why this push leaves the prefix, or undefined when every ref is a branch under it. */
export function pushOutsidePrefix(updates: RefUpdate[], prefix: string): string | undefined {
  const base = `refs/heads/${prefix}`;
  const bad = updates.filter((u) => !u.ref.startsWith(base) || u.ref.includes('..'));
  if (bad.length === 0) return undefined;
  return `push to ${bad.map((u) => u.ref).join(', ')} is outside refs/heads/${prefix}`;
}

function pkt(text: string | Buffer): Buffer {
  const body = typeof text === 'string' ? Buffer.from(text) : text;
  return Buffer.concat([Buffer.from((body.length + 4).toString(16).padStart(4, '0')), body]);
}

/**
 * A receive-pack result refusing every ref with `reason`, so git prints
 * `! [remote rejected] … (reason)` — readable to an agent, unlike a bare HTTP 403 on the POST.
 */
export function refusedPushResult(updates: RefUpdate[], capabilities: string[], reason: string): Buffer {
  const why = reason.replace(/[\r\n]/g, ' ').slice(0, 400);
  const report = Buffer.concat([pkt('unpack ok\n'), ...updates.map((u) => pkt(`ng ${u.ref} ${why}\n`)), Buffer.from('0000')]);
  const sideband = capabilities.includes('side-band-64k') || capabilities.includes('side-band');
  if (!sideband) return report;
  const max = capabilities.includes('side-band-64k') ? 65515 : 995;
  const frames: Buffer[] = [pkt(Buffer.concat([Buffer.from([2]), Buffer.from(`airlock: ${why}\n`)]))];
  for (let i = 0; i < report.length; i += max) frames.push(pkt(Buffer.concat([Buffer.from([1]), report.subarray(i, i + max)])));
  return Buffer.concat([...frames, Buffer.from('0000')]);
}
