import { AirlockError } from '../../../contracts/errors';
import { Allowlist, DEFAULT_PORT, formatAllowEntry, type AllowEntry } from '../allowlist';
import { addressRefusal } from '../egress-policy';
import { internalHostName, isIpLiteral, normalizeHostName, reservedNameReason } from '../address-checks';
import { hostMatches } from '../allowlist';
import { decideWithProject, parseRule, RuleSet } from './rules';
import type { SecretBinding } from './secret-store';

/** What `airlock network check` prints: which layer decides a request, without sending it. */
export interface CheckResult {
  url: string;
  method: string;
  host: string;
  port: number;
  allowed: boolean;
  /** `address`, `allowlist`, `rule`, `project-rule` or `tunnel` (allowed, not intercepted). */
  decidedBy: 'address' | 'allowlist' | 'rule' | 'project-rule' | 'tunnel';
  rule?: string;
  reason: string;
  intercepted: boolean;
  /** Secrets that would be injected (by name) if the request carried their placeholder. */
  secrets: string[];
}

export function checkRequest(input: {
  url: string;
  method: string;
  allow: Array<AllowEntry | string>;
  rules: string[];
  projectRules?: RuleSet;
  secrets: SecretBinding[];
  /** Hosts named as internal (may resolve to private addresses). */
  internalHosts?: readonly string[];
  /** The host's addresses, when the caller looked the name up (DNS only: nothing is sent to the host). */
  addresses?: readonly string[];
}): CheckResult {
  let url: URL;
  try {
    url = new URL(input.url);
  } catch {
    throw new AirlockError('INVALID_INPUT', `"${input.url}" is not a URL (write https://host/path)`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new AirlockError('INVALID_INPUT', 'only http:// and https:// URLs go through the egress gateway');
  const method = input.method.toUpperCase();
  const kind = url.protocol === 'https:' ? 'connect' : 'http';
  const port = url.port ? Number(url.port) : DEFAULT_PORT[kind];
  const raw = url.hostname.replace(/^\[|\]$/g, '');
  const base = { url: input.url, method, host: raw, port, intercepted: false, secrets: [] as string[] };
  if (isIpLiteral(raw)) return { ...base, allowed: false, decidedBy: 'address', reason: 'IP addresses are never reachable through the egress proxy; allow the host name' };
  const host = normalizeHostName(raw) ?? raw;
  const reserved = reservedNameReason(host);
  if (reserved) return { ...base, host, allowed: false, decidedBy: 'address', reason: reserved };
  const allowlist = new Allowlist(input.allow);
  const entry = allowlist.match(host, port, kind);
  if (!entry) return { ...base, host, allowed: false, decidedBy: 'allowlist', reason: `${host}:${port} is not on the allowlist` };
  const internal = (input.internalHosts ?? []).map(internalHostName).includes(host);
  const refused = input.addresses ? addressRefusal(host, input.addresses, { internal }) : undefined;
  if (refused) return { ...base, host, allowed: false, decidedBy: 'address', reason: refused };
  const rules = new RuleSet(input.rules.map(parseRule));
  const secrets = input.secrets.filter((s) => s.hosts.some((h) => hostMatches(h, host)) && (!s.pathPrefixes || s.pathPrefixes.some((p) => url.pathname.startsWith(p)))).map((s) => s.name);
  const intercepted = rules.covers(host) || input.projectRules?.covers(host) === true || input.secrets.some((s) => s.hosts.some((h) => hostMatches(h, host)));
  const common = { ...base, host, intercepted, secrets };
  if (!intercepted) return { ...common, allowed: true, decidedBy: 'tunnel', rule: formatAllowEntry(entry), reason: 'allowed as a plain tunnel: no rule or secret names this host, so requests are not seen' };
  if (kind === 'http') return { ...common, allowed: false, decidedBy: 'rule', reason: `${host} has rules or a secret, so it is reachable over https:// only` };
  const d = decideWithProject(rules, input.projectRules, { host, method, path: url.pathname, query: url.search.slice(1) });
  if (!d) return { ...common, allowed: true, decidedBy: 'allowlist', rule: formatAllowEntry(entry), reason: 'intercepted for a secret; no rule names this host' };
  return { ...common, allowed: d.allowed, decidedBy: d.rule.endsWith('(project policy)') ? 'project-rule' : 'rule', rule: d.rule, reason: d.reason };
}
