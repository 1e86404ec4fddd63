import type { Disposable, Event } from '../../common/disposable';
import { PendingQuestions, type SettledBy } from '../../common/pending-questions';
import { cleanAgentText } from '../gateway/network-approvals';
import type { McpServerEntry, McpToolRule } from './mcp-server-registry';
import type { GatewayTool, McpAnswer, McpCallPolicy, McpQuestion, McpQuestionsPort } from './run-mcp-gateway';

/**
 * The per-tool policy of a run's MCP gateway (docs/architecture.md §20): each tool is `allow`, `ask`
 * or `deny` by the user's rule on its server entry (`*` for the rest); a tool without one asks. A tool
 * whose description hash is not the one pinned when the user enabled the server (or that had no pin)
 * asks even when its rule is allow — tool poisoning is a description that changed after it was
 * trusted. `deny` always wins and hides the tool from the listing. Annotations (read-only, destructive)
 * are the server's own claims: shown to the user, never trusted to decide.
 */

/** How long a call waits for an answer before it is refused (as network questions). */
const WAIT_MS = 120_000;
/** Questions open at once per run: more are refused at once (an agent cannot flood the user). */
const MAX_PENDING = 8;
const MAX_ARGS_SHOWN = 1000;
const MAX_DESCRIPTION_SHOWN = 1000;

/** What a tool's entry says before anyone is asked. */
export interface ToolStanding {
  rule: McpToolRule;
  /** Whether the tool's description is the one the user enabled. */
  pin: 'same' | 'changed' | 'new';
}

/** The rule and pin standing of one tool of a server entry. */
export function toolStanding(entry: Pick<McpServerEntry, 'policy' | 'pins'>, tool: Pick<GatewayTool, 'tool' | 'descriptionHash'>): ToolStanding {
  const rule = entry.policy?.[tool.tool] ?? entry.policy?.['*'] ?? 'ask';
  const pinned = entry.pins?.[tool.tool];
  return { rule, pin: pinned === undefined ? 'new' : pinned === tool.descriptionHash ? 'same' : 'changed' };
}

/**
 * What a run's `open` record and terminal line say of each server's tools against its entry: tools
 * whose description changed since pinned, tools never pinned, tools the rule denies (hidden).
 */
export function reviewPins(entries: readonly McpServerEntry[], tools: readonly GatewayTool[]): Map<string, { changed: string[]; unpinned: string[]; denied: string[] }> {
  const out = new Map<string, { changed: string[]; unpinned: string[]; denied: string[] }>();
  for (const e of entries) out.set(e.name, { changed: [], unpinned: [], denied: [] });
  for (const t of tools) {
    const entry = entries.find((e) => e.name === t.server);
    const review = out.get(t.server);
    if (!entry || !review) continue;
    const s = toolStanding(entry, t);
    if (s.rule === 'deny') review.denied.push(t.tool);
    else if (s.pin === 'changed') review.changed.push(t.tool);
    else if (s.pin === 'new') review.unpinned.push(t.tool);
  }
  return out;
}

/** The calls waiting for the user in one run; answered from the run view or the CLI. */
export class McpApprovals implements McpQuestionsPort, Disposable {
  private readonly questions: PendingQuestions<McpQuestion, McpAnswer>;
  readonly onDidAsk: Event<McpQuestion>;
  readonly onDidResolve: Event<{ id: string; answer: McpAnswer; by: SettledBy; question: McpQuestion }>;

  constructor(waitMs = WAIT_MS) {
    this.questions = new PendingQuestions<McpQuestion, McpAnswer>({ waitMs, max: MAX_PENDING, idPrefix: 'mcp', refuse: 'deny' });
    this.onDidAsk = this.questions.onDidAsk;
    this.onDidResolve = this.questions.onDidResolve;
  }

  open(): McpQuestion[] {
    return this.questions.open();
  }

  /** Puts a call to the user; resolves with the answer (`deny` when the wait ends, the caller leaves or the run ends). */
  ask(q: Omit<McpQuestion, 'id' | 'answers' | 'expiresAt'>, signal?: AbortSignal): Promise<{ answer: McpAnswer; by: SettledBy }> {
    return this.questions.ask({ ...q, answers: ['once', 'run', 'deny'] }, signal);
  }

  /** The user's answer; false when the question is no longer open. */
  answer(id: string, answer: McpAnswer): boolean {
    return this.questions.answer(id, answer);
  }

  dispose(): void {
    this.questions.dispose();
  }
}

/** How to allow a tool for later runs: what a refusal tells the agent (and the user who reads its log). */
export function howToAllow(server: string, tool: string): string {
  return `airlock mcp-servers policy ${server} ${tool} allow`;
}

/**
 * The run's policy over its servers' entries. `mode` is the run's question mode: `ask` holds a call
 * for the user's answer; `deny` (no one can answer: a script, CI) refuses it at once, saying how to
 * allow it. Returns the gateway's hooks and the run's questions (to show, record and answer).
 */
export function createMcpRunPolicy(opts: { entries: readonly McpServerEntry[]; mode: 'ask' | 'deny'; waitMs?: number }): { policy: McpCallPolicy; hide: (t: GatewayTool) => boolean; approvals: McpApprovals } {
  const byName = new Map(opts.entries.map((e) => [e.name, e]));
  const approvals = new McpApprovals(opts.waitMs);
  // Tools the user allowed for the rest of this run ("run" answers).
  const runAllowed = new Set<string>();
  const standing = (t: GatewayTool): ToolStanding => {
    const entry = byName.get(t.server);
    return entry ? toolStanding(entry, t) : { rule: 'deny', pin: 'new' };
  };
  const policy: McpCallPolicy = async (t, call) => {
    const s = standing(t);
    if (s.rule === 'deny') return { decision: 'deny', by: 'policy', reason: `your rule for this tool is deny (change it with \`airlock mcp-servers policy ${t.server} ${t.tool} allow|ask\`)` };
    if (runAllowed.has(t.name)) return { decision: 'allow', by: 'user' };
    if (s.rule === 'allow' && s.pin === 'same') return { decision: 'allow', by: 'policy' };
    const why: McpQuestion['why'] = s.pin === 'changed' ? 'changed' : s.pin === 'new' ? 'new' : 'policy';
    if (opts.mode === 'deny') {
      const what = why === 'changed' ? 'its description changed since you enabled the server; review it with `airlock mcp-servers pin ' + t.server + '`' : why === 'new' ? 'it was not among the tools pinned when you enabled the server; review them with `airlock mcp-servers pin ' + t.server + '`' : `it asks first and this run does not wait for answers; allow it with \`${howToAllow(t.server, t.tool)}\``;
      return { decision: 'deny', by: 'no one to ask', reason: what };
    }
    const description = why === 'policy' ? undefined : cleanAgentText(String(t.definition.description ?? ''), MAX_DESCRIPTION_SHOWN);
    const { answer, by } = await approvals.ask({ server: t.server, tool: t.tool, why, ...(description !== undefined ? { description } : {}), args: cleanAgentText(JSON.stringify(call.args), MAX_ARGS_SHOWN) }, call.signal);
    if (answer === 'deny') return { decision: 'deny', by, reason: by === 'user' ? 'the user refused it' : by === 'timeout' ? 'no answer in time' : 'the question was closed' };
    if (answer === 'run') runAllowed.add(t.name);
    return { decision: 'allow', by };
  };
  return { policy, hide: (t) => standing(t).rule === 'deny', approvals };
}
