import { describe, expect, it } from 'vitest';
import type { ProviderConfig } from '../keys/provider-catalog';
import { Secret } from '../keys/secret';
import { bodyLength, type BodyParts } from '../upstream/json-body';
import { DEFAULT_PRICES } from './price-table';
import { newRunState, settleCall } from './proxy-ledger';
import { admitCall, type PickedUpstream, type SideDoorEvent } from './proxy-policy';
import type { TokenGrant } from './run-tokens';
import { noUsage } from './usage-meter';

/**
 * The policy and the ledger without HTTP (the proxy's seams, docs/architecture.md §3): what a call
 * may be, what it holds of the run's budget, and that settling it gives the hold back. The same
 * rules end to end: `test/integration/proxy-*.test.ts`.
 */
const ANTHROPIC: ProviderConfig = { id: 'anthropic', label: 'Anthropic', kind: 'anthropic', baseUrl: 'http://127.0.0.1:9', requiresKey: true, builtin: true, models: [] };
const upstream = (config: ProviderConfig = ANTHROPIC): PickedUpstream => ({ routePath: '/v1/messages', format: 'anthropic', providerId: config.id, resolved: { config, key: new Secret('sk-test') } });
const caller = (grant: Partial<TokenGrant> = {}) => {
  const g: TokenGrant = { runId: 'r1', providers: ['anthropic'], ...grant };
  return { grant: g, run: newRunState(g) };
};
const request = (body: Record<string, unknown>, headers: Record<string, string> = {}) => {
  const raw = Buffer.from(JSON.stringify(body));
  return { method: 'POST', pathAndQuery: '/v1/messages?beta=true', headers, source: { raw, parsed: JSON.parse(raw.toString()) as Record<string, unknown> } };
};
const text = (body: Buffer | BodyParts | undefined): string => (body === undefined ? '' : Buffer.isBuffer(body) ? body.toString() : Buffer.concat(body).toString());

describe('proxy policy', () => {
  it('refuses a model outside the grant and a provider without its key, and reports nothing else', () => {
    const doors: SideDoorEvent[] = [];
    const c = caller({ models: ['claude-a'] });
    expect(admitCall(c, upstream(), request({ model: 'claude-b', max_tokens: 10 }), DEFAULT_PRICES, (e) => doors.push(e))).toMatchObject({ ok: false, status: 403, message: expect.stringContaining("model 'claude-b' is not allowed") });
    const keyless = { ...upstream(), resolved: { config: ANTHROPIC } };
    expect(admitCall(caller(), keyless, request({ model: 'claude-a', max_tokens: 10 }), DEFAULT_PRICES, (e) => doors.push(e))).toMatchObject({ ok: false, status: 403, message: expect.stringContaining("no key stored for 'anthropic'") });
    expect(doors).toEqual([]);
  });

  it('strips a provider-side tool, says so, and sends exactly the body it read', () => {
    const doors: SideDoorEvent[] = [];
    const admitted = admitCall(caller(), upstream(), request({ model: 'm', max_tokens: 10, tools: [{ type: 'web_search_20250305', name: 'web_search' }], messages: [] }), DEFAULT_PRICES, (e) => doors.push(e));
    if (!admitted.ok) throw new Error(admitted.message);
    expect(doors).toEqual([{ runId: 'r1', provider: 'anthropic', path: '/v1/messages', stripped: [expect.stringContaining('web_search')], allowed: [] }]);
    expect(JSON.parse(text(admitted.call.body))).toEqual(admitted.call.parsed);
    expect(text(admitted.call.body)).not.toContain('web_search');
    expect(admitted.call.pathAndQuery).toBe('/v1/messages?beta=true');
  });

  it("holds the call's share of the budget until the ledger settles it, and refuses what would pass it", () => {
    const c = caller({ budget: { maxTokens: 1000 } });
    const first = admitCall(c, upstream(), request({ model: 'm', max_tokens: 400, messages: [] }), DEFAULT_PRICES, () => undefined);
    if (!first.ok) throw new Error(first.message);
    expect(c.run.held.tokens).toBeGreaterThanOrEqual(400);
    expect(first.call.hold.tokens).toBe(c.run.held.tokens);
    // A second call in flight gets only what is left, lowered; a third finds too little and is refused.
    const second = admitCall(c, upstream(), request({ model: 'm', max_tokens: 4000, messages: [] }), DEFAULT_PRICES, () => undefined);
    if (!second.ok) throw new Error(second.message);
    expect((second.call.parsed as { max_tokens: number }).max_tokens).toBeLessThan(1000);
    expect(bodyLength(second.call.body!)).toBe(Buffer.byteLength(text(second.call.body)));
    const third = admitCall(c, upstream(), request({ model: 'm', max_tokens: 4000, messages: [] }), DEFAULT_PRICES, () => undefined);
    expect(third).toMatchObject({ ok: false, status: 429 });
    expect(c.run.budgetStop).toBeDefined();
    // Settling both returns their holds and counts what they used.
    for (const call of [first.call, second.call]) settleCall(call, { status: 200, usage: { ...noUsage(), inputTokens: 5, outputTokens: 7 }, aborted: false, started: 0 }, DEFAULT_PRICES, { event: false, transcripts: false });
    expect(c.run.held).toEqual({ tokens: 0, costUsd: 0 });
    expect(c.run.usage).toMatchObject({ inputTokens: 10, outputTokens: 14 });
  });
});
