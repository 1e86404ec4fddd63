import type { IncomingMessage } from 'node:http';
import { credentialRefusal, credentialServes, storeCommand } from '../keys/subscription-credentials';
import { OAUTH_BETA } from '../upstream/upstream-client';
import { bodyLength, serializeBody, type BodyParts } from '../upstream/json-body';
import { AGENT_PREFIX, budgetMessage, checkBudget, lowerOutput, outputLimitOf, type BudgetAmount } from './budget';
import type { RunState } from './proxy-ledger';
import type { PriceTable } from './price-table';
import type { TokenGrant } from './run-tokens';
import { applySideDoorPolicy } from './side-doors';
import { currentKey, type ResolvedUpstream } from './upstream-resolver';
import type { WireFormat } from './wire-format';

/**
 * The model proxy's policy (docs/architecture.md §2.1, §9, §12): whether a well-formed call may go
 * out and in which form — the grant's models and credential, side doors and URL content stripped
 * or refused, usage asked of streamed Chat Completions, and the run's budget held or the output
 * limit lowered. It decides on the parsed body; it does no I/O.
 */

/**
 * The proxy stripped, refused or (by the provider's setting) let through a side door of a call:
 * a provider-side tool, `mcp_servers`, an unknown `anthropic-beta`, URL-sourced content (see side-doors.ts).
 */
export interface SideDoorEvent {
  runId: string;
  provider: string;
  path: string;
  stripped: string[];
  allowed: string[];
  /** The side door the call needed, when the call was refused (400) for it. */
  refused?: string;
}

/** A request carrying a valid run token. */
export interface Caller {
  grant: TokenGrant;
  run: RunState;
}

/** The route and the run's provider that serves it. */
export interface PickedUpstream {
  routePath: string;
  format: WireFormat;
  providerId: string;
  resolved: ResolvedUpstream;
}

/** A call that passed every check and goes upstream. */
export interface AdmittedCall extends Caller, PickedUpstream {
  method: string;
  pathAndQuery: string;
  /** The client's headers, less any `anthropic-beta` values the side-door policy removed. */
  headers: IncomingMessage['headers'];
  /** Whole as received, or re-serialised in parts (json-body.ts). */
  body?: Buffer | BodyParts;
  parsed?: Record<string, unknown>;
  model: string;
  stream: boolean;
  /** What this call holds of the run's budget until it finishes. */
  hold: BudgetAmount;
}

/** What the intake read of a call. */
export interface CallRequest {
  method: string;
  pathAndQuery: string;
  headers: IncomingMessage['headers'];
  /** The body as received and its parse (POST only): a re-serialised body copies its conversation from it. */
  source?: { raw: Buffer; parsed: Record<string, unknown> };
}

export type Admission = { ok: true; call: AdmittedCall } | { ok: false; status: number; message: string };

/** An `anthropic-beta` header without Claude Code's OAuth marker (undefined when nothing else is left). */
function withoutOauthBeta(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined;
  const rest = (Array.isArray(header) ? header.join(',') : header).split(',').map((v) => v.trim()).filter((v) => v && v !== OAUTH_BETA);
  return rest.length ? rest.join(',') : undefined;
}

/** Why an otherwise well-formed call may not go out: a model outside the grant, no key. */
function refusalFor(grant: TokenGrant, resolved: ResolvedUpstream, providerId: string, model: string): { status: number; message: string } | undefined {
  if (grant.models && model && !grant.models.includes(model)) {
    return { status: 403, message: `model '${model.slice(0, 100)}' is not allowed for this run (allowed: ${grant.models.join(', ')})` };
  }
  if (resolved.config.credential && !credentialServes(resolved.config.credential, grant.agent)) {
    return { status: 403, message: credentialRefusal(resolved.config.credential, providerId, grant.agent) };
  }
  if (resolved.config.requiresKey && !currentKey(resolved)) {
    return { status: 403, message: `no ${resolved.config.credential ? 'sign-in' : 'key'} stored for '${providerId}'; add one with \`${storeCommand(providerId, resolved.config.credential)}\`` };
  }
  return undefined;
}

/**
 * Checks model, credential, side doors and budget of a call the intake read; the admitted call
 * holds its share of the run's budget until the ledger settles it. `onSideDoor` hears every call
 * with a side door stripped, allowed or refused (before a refusal is answered).
 */
export function admitCall(caller: Caller, upstream: PickedUpstream, request: CallRequest, prices: PriceTable, onSideDoor: (e: SideDoorEvent) => void): Admission {
  const { providerId, resolved } = upstream;
  const { source } = request;
  let parsed = source?.parsed;
  let body: Buffer | BodyParts | undefined = source?.raw;
  const model = typeof parsed?.model === 'string' ? parsed.model : '';
  const stream = parsed?.stream === true;
  const refusal = refusalFor(caller.grant, resolved, providerId, model);
  if (refusal) return { ok: false, ...refusal };
  // Side doors: provider-side tools and MCP servers would carry data out with the network off.
  // A subscription's OAuth beta is the proxy's own to set (upstream-client.ts), not a side door.
  const betaHeader = resolved.config.credential === 'claude-subscription' ? withoutOauthBeta(request.headers['anthropic-beta']) : request.headers['anthropic-beta'];
  const doors = applySideDoorPolicy({ format: upstream.format, parsed, raw: source?.raw, betaHeader, allow: resolved.config.allowSideDoors ?? [] });
  if (doors.stripped.length || doors.allowed.length || doors.refusal) {
    onSideDoor({ runId: caller.grant.runId, provider: providerId, path: upstream.routePath, stripped: doors.stripped, allowed: doors.allowed, ...(doors.refusal ? { refused: doors.refusal.name } : {}) });
  }
  if (doors.refusal) return { ok: false, status: doors.refusal.status, message: doors.refusal.message };
  let reserialise = false;
  if (doors.body) {
    parsed = doors.body;
    reserialise = true;
  }
  let headers = request.headers;
  if (doors.beta) {
    headers = { ...request.headers };
    if (doors.beta.value === undefined) delete headers['anthropic-beta'];
    else headers['anthropic-beta'] = doors.beta.value;
  }
  if (parsed && stream && upstream.routePath === '/v1/chat/completions' && parsed.stream_options === undefined) {
    // Without this, streamed Chat Completions carry no usage and token budgets could not hold.
    parsed.stream_options = { include_usage: true };
    reserialise = true;
  }
  // Once, after every change: what goes upstream is exactly what the policy read.
  if (reserialise && parsed) body = serializeBody(parsed, source);
  const budget = holdBudget(caller.run, upstream, parsed, body, model, prices, source);
  if ('refused' in budget) return { ok: false, status: 429, message: budget.refused };
  // Named one by one: a second spread in a literal takes V8's slow path (µs per call, and the call
  // object every later step reads would be a dictionary).
  const call: AdmittedCall = {
    grant: caller.grant,
    run: caller.run,
    routePath: upstream.routePath,
    format: upstream.format,
    providerId: upstream.providerId,
    resolved: upstream.resolved,
    method: request.method,
    pathAndQuery: request.pathAndQuery,
    headers,
    body: budget.body,
    parsed: budget.parsed,
    model,
    stream,
    hold: budget.hold,
  };
  return { ok: true, call };
}

/**
 * Holds the call's share of the run's budget, lowering its output limit to what is left or
 * refusing it when too little is (budget.ts). A lowered limit re-serialises the body.
 */
function holdBudget(
  run: RunState,
  upstream: PickedUpstream,
  parsed: Record<string, unknown> | undefined,
  body: Buffer | BodyParts | undefined,
  model: string,
  prices: PriceTable,
  source?: { raw: Buffer; parsed: Record<string, unknown> },
): { body?: Buffer | BodyParts; parsed?: Record<string, unknown>; hold: BudgetAmount } | { refused: string } {
  const u = run.usage;
  const decision = checkBudget({
    budget: run.grant.budget,
    used: { tokens: u.inputTokens + u.outputTokens + u.cacheReadTokens + u.cacheWriteTokens, costUsd: u.costUsd, requests: u.requests },
    held: run.held,
    bodyBytes: body ? bodyLength(body) : 0,
    output: parsed ? outputLimitOf(upstream.routePath, upstream.resolved.config.kind, parsed) : undefined,
    model,
    prices,
  });
  if (decision.action === 'refuse') {
    run.budgetStop = decision.stop;
    return { refused: AGENT_PREFIX + budgetMessage(decision.stop) };
  }
  let out = { body, parsed };
  if (decision.action === 'lower' && parsed) {
    const lowered = lowerOutput(parsed, decision.field, decision.maxOutput);
    if (!lowered) {
      run.budgetStop = decision.stop;
      return { refused: AGENT_PREFIX + budgetMessage(decision.stop) };
    }
    out = { parsed: lowered, body: serializeBody(lowered, source) };
  }
  run.held = { tokens: run.held.tokens + decision.hold.tokens, costUsd: run.held.costUsd + decision.hold.costUsd };
  return { body: out.body, parsed: out.parsed, hold: decision.hold };
}
