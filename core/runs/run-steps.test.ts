import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { readFile } from 'node:fs/promises';
import type { RunEvent, RunSummary, StartRunArgs } from '../../contracts/runs';
import { StartRunInput } from '../../contracts/runs';
import { createRunFakes, type RunFakes } from '../../test/support/run-fakes';
import { DisposableStore } from '../common/disposable';
import type { LiveRun, LiveSessionRun, StepHost } from './run-context';
import type { Sandbox } from '../sandbox/sandbox';
import { networkStep } from './run-network';
import { RunService } from './run-service';
import { collectStep, wipeStep } from './run-steps';
import { DEFAULT_LIMITS } from '../sandbox/driver';

let fakes: RunFakes;
let service: RunService;
beforeEach(async () => {
  fakes = await createRunFakes();
  service = new RunService(fakes.deps);
});
afterEach(async () => {
  service.dispose();
  await fakes.dispose();
});

const input = (): StartRunArgs => StartRunInput.parse({ projectDir: '/tmp/project', task: 'do it', agent: 'custom', customCommand: 'agent', provider: 'anthropic', model: 'm' });

/** Where `what` first appears in the log (a missing step fails here, by name). */
function at(what: string): number {
  const i = fakes.log.findIndex((l) => l === what || l.startsWith(`${what} `));
  expect(i, `${what} in ${fakes.log.join(', ')}`).toBeGreaterThanOrEqual(0);
  return i;
}

function expectInOrder(...steps: string[]): void {
  const positions = steps.map(at);
  expect(positions, `order of ${steps.join(' → ')} in ${fakes.log.join(', ')}`).toEqual([...positions].sort((a, b) => a - b));
}

async function runToEnd() {
  const statuses: RunSummary['status'][] = [];
  service.onDidChangeStatus((r) => {
    if (statuses.at(-1) !== r.status) statuses.push(r.status);
  });
  const started = await service.start(input());
  const final = await service.wait(started.id);
  return { final, statuses };
}

describe('a run as named steps (fakes of the sandbox, channel, proxy and workspace)', () => {
  it('prepares, hydrates, opens the network, runs the agent, collects, then wipes and revokes the token', async () => {
    const { final, statuses } = await runToEnd();
    expectInOrder('snapshot', 'image', 'create', 'hydrate', 'issueToken', 'exposeHostService', 'watch', 'spawn', 'collect', 'unexpose', 'destroy', 'revokeRun');
    expect(statuses).toEqual(['queued', 'preparing', 'running', 'collecting', 'wiping', 'done']);
    expect(final).toMatchObject({ status: 'done', changedFiles: [{ path: 'a.txt', status: 'added' }], excludedFiles: [{ path: '.env' }], wipe: { verified: true } });
    // The agent was pointed at the proxy's port inside the sandbox.
    expect(fakes.log).toContain('spawn agent http://127.0.0.1:40123');
    expect(fakes.liveTokens.size).toBe(0);
  });

  it('collects the diff of an agent that failed, before the wipe, and still revokes the token', async () => {
    fakes.agentExit.code = 1;
    const { final } = await runToEnd();
    expectInOrder('spawn', 'collect', 'destroy', 'revokeRun');
    expect(final).toMatchObject({ status: 'failed', error: { kind: 'SANDBOX_FAILED' }, changedFiles: [{ path: 'a.txt' }] });
    expect(fakes.liveTokens.size).toBe(0);
  });

  it.each(['snapshot', 'create', 'hydrate', 'exposeHostService', 'collect'])('wipes and revokes when %s fails, and runs no later step', async (step) => {
    fakes.failAt(step);
    const { final } = await runToEnd();
    expect(final.status).toBe('failed');
    expect(final.error?.message).toContain(`${step} failed`);
    expect(fakes.log.at(-1)).toBe('revokeRun');
    expect(fakes.liveTokens.size).toBe(0);
    if (step !== 'collect') expect(fakes.log.some((l) => l.startsWith('spawn'))).toBe(false);
    // A sandbox that was created is destroyed (the scan runs beside its creation); none is destroyed that never existed.
    expect(fakes.log.includes('destroy')).toBe(step !== 'create');
  });

  it('revokes the token even when the wipe itself fails, and says the wipe failed', async () => {
    fakes.failAt('destroy');
    const { final } = await runToEnd();
    expectInOrder('collect', 'destroy', 'revokeRun');
    expect(final).toMatchObject({ status: 'failed', error: { message: expect.stringContaining('Wiping the sandbox failed') } });
    expect(fakes.liveTokens.size).toBe(0);
  });

  it('on cancel stops the agent, keeps its diff, wipes', async () => {
    fakes.agentExit.code = 'hang';
    const started = await service.start(input());
    await vi.waitFor(() => expect(fakes.log.some((l) => l.startsWith('spawn'))).toBe(true));
    await service.cancel(started.id);
    const final = await service.wait(started.id);
    expectInOrder('spawn', 'kill', 'collect', 'destroy', 'revokeRun');
    expect(final).toMatchObject({ status: 'cancelled', changedFiles: [{ path: 'a.txt' }] });
  });

  // Issue 44: never a silent reset; the run view (a typed event, so `--json` too) and the audit log say it.
  it('reports the sandbox hitting its connection cap as a run event and an audit record naming the service', async () => {
    fakes.agentExit.code = 'hang';
    const events: RunEvent[] = [];
    service.onDidEvent((e) => events.push(e));
    const started = await service.start(input());
    await vi.waitFor(() => expect(fakes.log.some((l) => l.startsWith('spawn'))).toBe(true));
    fakes.refuseConnections({ service: 'model proxy', limit: 256, refused: 1, ended: false });
    fakes.refuseConnections({ service: 'model proxy', limit: 256, refused: 7, ended: true });
    await service.cancel(started.id);
    await service.wait(started.id);
    expect(events.filter((e) => e.event.type === 'connections_refused').map((e) => e.event)).toEqual([
      { type: 'connections_refused', service: 'model proxy', limit: 256, refused: 1, ended: false },
      { type: 'connections_refused', service: 'model proxy', limit: 256, refused: 7, ended: true },
    ]);
    const audit = (await readFile(fakes.deps.store.paths(started.id).audit, 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as { type: string; data: unknown });
    expect(audit.filter((r) => r.type === 'connections_refused').map((r) => r.data)).toEqual([
      { service: 'model proxy', limit: 256, refused: 1, ended: false },
      { service: 'model proxy', limit: 256, refused: 7, ended: true },
    ]);
  });
});

// Issue 39: a session is its own kind of run: no agent, no provider, no run token, its own pipeline.
describe('an MCP session (its own pipeline, no agent fields)', () => {
  it('prepares, hydrates, waits for the client, collects and wipes, and never mints a run token or starts an agent', async () => {
    const started = await service.startSession({ projectDir: '/tmp/project', client: 'test-client 1.0', isolation: 'container', network: 'none', timeoutSec: 60 });
    expect(started).toMatchObject({ kind: 'session', agent: 'mcp', mcpClient: 'test-client 1.0', status: 'running' });
    const final = await service.endSession(started.id, 'the client ended it');
    expect(final).toMatchObject({ kind: 'session', status: 'done', wipe: { verified: true } });
    expectInOrder('snapshot', 'create', 'hydrate', 'watch', 'collect', 'destroy', 'revokeRun');
    expect(fakes.log.filter((l) => l.startsWith('issueToken') || l.startsWith('spawn'))).toEqual([]);
    await expect(service.endSession(started.id, 'again')).resolves.toMatchObject({ status: 'done' });
  });

  it('refuses to end an agent run as a session', async () => {
    fakes.agentExit.code = 'hang';
    const started = await service.start(input());
    expect(started.kind).toBe('agent');
    await vi.waitFor(() => expect(fakes.log.some((l) => l.startsWith('spawn'))).toBe(true));
    await expect(service.endSession(started.id, 'x')).rejects.toMatchObject({ kind: 'CONFLICT' });
    await service.cancel(started.id);
    await service.wait(started.id);
  });
});

// Issue 39: each step takes the products of the steps before it; what must be cleaned up is reachable from `made`.
describe('the pipelines hand products on', () => {
  it('a session has no run-token, model-proxy or agent stage: prepare, hydrate, policy, the client, collect, wipe', async () => {
    const started = await service.startSession({ projectDir: '/tmp/project', client: 'c', isolation: 'container', network: 'none', timeoutSec: 60 });
    await service.endSession(started.id, 'done');
    expectInOrder('snapshot', 'create', 'hydrate', 'watch', 'collect', 'destroy', 'revokeRun');
    expect(fakes.log.filter((l) => /^(issueToken|exposeHostService|spawn|kill)/.test(l))).toEqual([]);
  });

  it('a session whose hydrate fails still wipes the sandbox prepare made, and never reaches the client', async () => {
    fakes.failAt('hydrate');
    await expect(service.startSession({ projectDir: '/tmp/project', client: 'c', isolation: 'container', network: 'none', timeoutSec: 60 })).rejects.toMatchObject({ message: expect.stringContaining('hydrate failed') });
    expectInOrder('create', 'hydrate', 'destroyed sb-1', 'revokeRun');
    expect(fakes.log.some((l) => l === 'watch' || l === 'collect')).toBe(false);
  });

  it('an agent run whose hydrate fails wipes what prepare made and mints no run token', async () => {
    fakes.failAt('hydrate');
    const { final } = await runToEnd();
    expect(final).toMatchObject({ status: 'failed', error: { message: expect.stringContaining('hydrate failed') } });
    expectInOrder('create', 'hydrate', 'destroyed sb-1', 'revokeRun');
    expect(fakes.log.filter((l) => /^(issueToken|exposeHostService|spawn|collect)/.test(l))).toEqual([]);
  });

  it('a base that fails its check: the sandbox made from it goes, the run goes on in the one made afresh, and the wipe takes that one', async () => {
    fakes.useBase({ mismatch: true });
    const { final } = await runToEnd();
    expect(final).toMatchObject({ status: 'done', wipe: { verified: true } });
    // The new base is written from the copy once the run is wiped.
    const steps = fakes.log.filter((l) => /^(claim base|create|hydrate|destroyed|discard base|issueToken|spawn|collect|refresh base|revokeRun)/.test(l));
    expect(steps).toEqual(['claim base', 'create', 'hydrate', 'destroyed sb-1', 'discard base', 'create', 'hydrate', 'issueToken', 'spawn agent http://127.0.0.1:40123', 'collect', 'destroyed sb-2', 'refresh base', 'revokeRun']);
  });

  it('cancelled while the agent works: the grant is released before the wipe, which destroys the sandbox the steps made', async () => {
    fakes.agentExit.code = 'hang';
    const started = await service.start(input());
    await vi.waitFor(() => expect(fakes.log.some((l) => l.startsWith('spawn'))).toBe(true));
    await service.cancel(started.id);
    await service.wait(started.id);
    expectInOrder('issueToken', 'spawn', 'kill', 'collect', 'unexpose', 'destroyed sb-1', 'revokeRun');
    expect(fakes.liveTokens.size).toBe(0);
  });
});

describe('one step at a time', () => {
  const host = (): StepHost => ({
    deps: fakes.deps,
    workspace: fakes.deps.workspace as NonNullable<typeof fakes.deps.workspace>,
    transition: async () => undefined,
    update: async () => undefined,
    updateLater: () => undefined,
    auditLater: () => undefined,
    emitEvent: () => undefined,
    filesChanged: () => undefined,
    runAgent: async () => undefined,
  });
  const bare = (made: LiveRun['made'] = {}): LiveRun => ({ id: 'r-x-00000000', kind: 'agent', spec: { kind: 'agent', args: input(), agent: fakes.deps.agent('custom'), sessionId: 's' }, input: input(), made, disposables: new DisposableStore(), audit: { append: async () => undefined } } as unknown as LiveRun);

  it('collect takes the hydrated workspace: a pipeline that calls it before hydrate does not compile', () => {
    // @ts-expect-error collect needs the product of hydrate (checked by `npm run lint`'s typecheck)
    const misordered = (): unknown => collectStep(host(), bare());
    expect(misordered).toBeTypeOf('function');
  });

  it('a session has no agent fields and no token stage: the compiler refuses both', () => {
    // @ts-expect-error a live MCP session has no agent (no process, grant or approvals)
    const agentOf = (run: LiveSessionRun): unknown => run.agent;
    // @ts-expect-error the network step that mints a run token takes only an agent run
    const mint = (run: LiveSessionRun, sandbox: Sandbox): unknown => networkStep(host(), run, sandbox, async () => undefined);
    expect([agentOf, mint].every((f) => typeof f === 'function')).toBe(true);
  });

  it('wipe revokes the run token when there is no sandbox to destroy', async () => {
    const result = await wipeStep(host(), bare(), undefined);
    expect(fakes.log).toEqual(['revokeRun']);
    expect(result.failure).toBeUndefined();
  });

  it('wipe destroys the sandbox recorded as made, whatever step failed after it', async () => {
    const sandbox = await (await fakes.deps.sandboxes('container')).create({ runId: 'r-x-00000000', image: 'i', limits: DEFAULT_LIMITS, network: 'none' });
    const result = await wipeStep(host(), bare({ sandbox }), { kind: 'SANDBOX_FAILED', message: 'hydrate failed' });
    expect(fakes.log).toEqual(['create', 'destroy', 'destroyed sb-1', 'revokeRun']);
    expect(result).toMatchObject({ failure: { message: 'hydrate failed' }, wipe: { verified: true } });
  });
});
