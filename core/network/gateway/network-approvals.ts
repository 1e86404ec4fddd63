import { AirlockError } from '../../../contracts/errors';
import type { Disposable, Event } from '../../common/disposable';
import { PendingQuestions } from '../../common/pending-questions';
import type { ProjectNetworkStore } from '../project-network-store';
import { globToRegExp, parseRule, type GatewayRule, type RuleSet } from './rules';

/**
 * Approvals while an intercepted request waits (docs/architecture.md §2.8): a request a user rule
 * refused is held (bounded) and put to the user — Allow once, Allow for this project, Deny — and the
 * agent may propose a narrower rule with a reason. Everything the agent sends is attacker-written:
 * the host parses the rule itself, shows its own canonical text, and acts only on that.
 */

/** `once`: this request only. `run`: the rule for the rest of this run. `project`: the rule for later runs too. */
export type NetworkAnswer = 'once' | 'run' | 'project' | 'deny';

/** A question put to the user. `rule` is the host's own text of what an allow adds. */
export interface NetworkApprovalRequest {
  id: string;
  /** `request`: a refused request waits. `proposal`: the agent proposes a rule. */
  kind: 'request' | 'proposal';
  host: string;
  port: number;
  method: string;
  /** Path with query values redacted. */
  path: string;
  /** The rule the host would add ("Allow for this project", or the parsed proposal). Absent when only once/deny are offered. */
  rule?: string;
  /** The rule that refused the request (kind `request`). */
  deniedBy?: string;
  /** The agent's reason (kind `proposal`): attacker-written, control characters removed, bounded. */
  reason?: string;
  /** Which answers the user is offered. */
  answers: NetworkAnswer[];
  /** ISO time the request stops waiting (then it is denied). */
  expiresAt: string;
}

export interface NetworkApprovalResolved {
  id: string;
  answer: NetworkAnswer;
  by: 'user' | 'timeout' | 'closed';
  request: NetworkApprovalRequest;
}

export interface NetworkApprovalsOptions {
  /** The run's user rules: an approved rule is put first, so it decides before the rule that refused. */
  rules: RuleSet;
  /** "For this project" persists here (the user's data directory, never the project's policy file). */
  projectStore?: ProjectNetworkStore;
  /** Hosts this run intercepts: a proposal must name one of them. */
  intercepts(host: string): boolean;
  /** How long a request waits for an answer (default 120 s). */
  waitMs?: number;
}

/** Where and how an agent proposes a rule: a plain-HTTP request through the run's egress proxy. */
export const ACCESS_DESK_HOST = 'airlock.invalid';
export const ACCESS_DESK_PATH = '/request-access';
export const HOW_TO_PROPOSE = `curl -sS http://${ACCESS_DESK_HOST}${ACCESS_DESK_PATH} --data-urlencode 'rule=HOST allow METHOD /path/glob' --data-urlencode 'reason=WHY'`;

/** Most questions open at once per run: an agent cannot flood the user (more are denied at once). */
const MAX_PENDING = 8;
const MAX_REASON = 300;
const MAX_BODY = 4096;

/** Removes control and bidirectional-override characters and bounds the length. */
export function cleanAgentText(text: string, max = MAX_REASON): string {
  const cleaned = text.replace(/[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2066-\u2069]/g, ' ').replace(/\s+/g, ' ').trim();
  return cleaned.length > max ? `${cleaned.slice(0, max)}…` : cleaned;
}

/** The rule "Allow for this project" adds for one refused request: this host, this method, this exact path. */
export function ruleForRequest(host: string, method: string, path: string): string | undefined {
  // A literal `*` would be read as a glob (wider than the path asked for): only once/deny are offered then.
  if (path.includes('*') || /\s/.test(path) || !path.startsWith('/')) return undefined;
  return parseRule(`${host} allow ${method} ${path}`).text;
}

/** Segment names no glob written by an agent can know: a glob matching paths made of them matches any path of that depth. */
const PROBE_SEGMENTS = ['airlock-probe-7q', 'Zx9-unnamed.seg', '0'];

/**
 * Whether a path glob is narrower than "every path", judged by the matcher's meaning, not its text:
 * `*` and `**` match any segment, so a glob must hold one whole segment with no `*` (and not `.`
 * or `..`), and must match none of the paths made only of segments it does not name, at depths
 * 1–4 (so `/***`, `/**` twice over, or `/*` then `/**` are not narrower).
 */
export function pinsAPath(glob: string): boolean {
  const segs = glob.split('/').filter(Boolean);
  if (!segs.some((seg) => !seg.includes('*') && seg !== '.' && seg !== '..')) return false;
  const re = globToRegExp(glob);
  const folded = new RegExp(re.source, 'i');
  for (const seg of PROBE_SEGMENTS) {
    for (let depth = 1; depth <= 4; depth++) {
      const probe = `/${Array(depth).fill(seg).join('/')}`;
      if (re.test(probe) || folded.test(probe) || re.test(`${probe}/`)) return false;
    }
  }
  return true;
}

/** Checks an agent's proposed rule; returns the parsed rule or says what is wrong (shown to the agent). */
export function checkProposal(text: string, intercepts: (host: string) => boolean): GatewayRule | { error: string } {
  let rule: GatewayRule;
  try {
    rule = parseRule(text.slice(0, 400));
  } catch (err) {
    return { error: (err as Error).message };
  }
  if (rule.host.startsWith('*.')) return { error: 'a proposed rule names one host, not a wildcard' };
  if (!intercepts(rule.host)) return { error: `${rule.host} has no rules in this run; ask the user to add the host instead` };
  // Only `allow METHODS /path`: read-only, git-fetch and git-push pass every other method, so they are never "narrower".
  if (rule.kind !== 'allow' || !rule.methods || !rule.path) return { error: 'propose an allow rule that names its methods and a path glob: HOST allow METHOD /path/glob' };
  if (!pinsAPath(rule.path)) return { error: 'a proposed rule must be narrower than the whole host: name at least one whole path segment without * (e.g. /repos/NAME/**)' };
  return rule;
}

export class NetworkApprovals implements Disposable {
  private readonly questions: PendingQuestions<NetworkApprovalRequest, NetworkAnswer>;
  /** A question was put to the user (fire the typed run event and audit it). */
  readonly onDidAsk: Event<NetworkApprovalRequest>;
  /** A question was answered, timed out, or its request went away. */
  readonly onDidResolve: Event<NetworkApprovalResolved>;

  constructor(private readonly opts: NetworkApprovalsOptions) {
    this.questions = new PendingQuestions<NetworkApprovalRequest, NetworkAnswer>({ waitMs: opts.waitMs ?? 120_000, max: MAX_PENDING, idPrefix: 'net', refuse: 'deny' });
    this.onDidAsk = this.questions.onDidAsk;
    this.onDidResolve = (listener) => this.questions.onDidResolve((r) => listener({ id: r.id, answer: r.answer, by: r.by, request: r.question }));
  }

  /** The questions open now. */
  open(): NetworkApprovalRequest[] {
    return this.questions.open();
  }

  /**
   * Holds a request a user rule refused until the user answers (or the wait ends: deny). Resolves
   * `once`/`project` when it may go on — for `project` the rule is already in force and stored.
   */
  ask(q: { host: string; port: number; method: string; path: string; canonicalPath: string; deniedBy: string }, signal?: AbortSignal): Promise<NetworkAnswer> {
    const rule = ruleForRequest(q.host, q.method, q.canonicalPath);
    return this.put({ kind: 'request', host: q.host, port: q.port, method: q.method, path: q.path, deniedBy: q.deniedBy, ...(rule ? { rule } : {}), answers: rule ? ['once', 'project', 'deny'] : ['once', 'deny'] }, signal);
  }

  /**
   * The agent's proposal (`rule=…&reason=…`, form-encoded, from the sandbox): checked on the host,
   * then put to the user. Returns what the agent is told.
   */
  async propose(body: string, port: number, signal?: AbortSignal): Promise<{ status: number; text: string }> {
    if (body.length > MAX_BODY) return { status: 413, text: `the proposal is over ${MAX_BODY} bytes` };
    const form = new URLSearchParams(body);
    const ruleText = form.get('rule');
    if (!ruleText) return { status: 400, text: `send the rule and a reason: ${HOW_TO_PROPOSE}` };
    const checked = checkProposal(ruleText, this.opts.intercepts);
    if ('error' in checked) return { status: 400, text: `the proposed rule was not put to the user: ${checked.error}` };
    const reason = cleanAgentText(form.get('reason') ?? '');
    if (!reason) return { status: 400, text: 'say why the rule is needed (reason=…)' };
    const answer = await this.put(
      { kind: 'proposal', host: checked.host, port, method: checked.methods?.join(',') ?? 'POST', path: checked.path ?? '/', rule: checked.text, reason, answers: ['run', 'project', 'deny'] },
      signal,
    );
    if (answer === 'deny') return { status: 403, text: `the user did not approve the rule "${checked.text}"` };
    return { status: 200, text: `approved: "${checked.text}" is in force ${answer === 'project' ? 'for this project' : 'for this run'}; retry the request` };
  }

  /** The user's answer. False when the question is no longer open or the answer was not offered. */
  async answer(id: string, answer: NetworkAnswer): Promise<boolean> {
    const request = this.questions.get(id);
    if (!request) return false;
    if (!request.answers.includes(answer)) throw new AirlockError('INVALID_INPUT', `"${answer}" is not offered for this request; choose ${request.answers.join(', ')}`);
    if ((answer === 'project' || answer === 'run') && request.rule) {
      if (answer === 'project') {
        if (!this.opts.projectStore) throw new AirlockError('CONFLICT', 'This run has no project to remember the rule for; choose Allow once or this run.');
        await this.opts.projectStore.addRule(request.rule);
      }
      // In force before the request goes on: its retry, and the next one, pass.
      this.opts.rules.prepend(parseRule(request.rule));
    }
    return this.questions.answer(id, answer);
  }

  dispose(): void {
    this.questions.dispose();
  }

  private async put(body: Omit<NetworkApprovalRequest, 'id' | 'expiresAt'>, signal?: AbortSignal): Promise<NetworkAnswer> {
    return (await this.questions.ask(body, signal)).answer;
  }
}
