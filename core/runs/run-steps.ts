import { connect } from 'node:net';
import path from 'node:path';
import { rm } from 'node:fs/promises';
import { AirlockError, toErrorInfo, type ErrorInfo } from '../../contracts/errors';
import type { RunEnvironment } from '../../contracts/environments';
import { DEFAULT_GIT_HISTORY } from '../../contracts/runs';
import type { AgentCommandContext } from '../agents';
import { commandEnv } from '../common/command-env';
import { PreviewPorts } from '../network/preview-ports';
import { proxyEnvFor } from '../proxy/model-proxy';
import { DEFAULT_LIMITS, type SandboxSpec } from '../sandbox/driver';
import type { LiveRun, RunNetwork, StepHost } from './run-context';
import { imageVariantOf, type AgentRunSpec, type SessionControl } from './run-spec';
import { resultPaths } from './run-apply';
import { checkStep, stopLeftoverProcesses } from './run-check';
import { restorePreparedHome, setupStep } from './run-setup';
import { toChangedFile, type StoredRun } from './run-record';
import { Checkpointer } from './checkpoints';
import { captureSession, restoreSession, saveSession } from './run-session';
import { sessionFile } from './run-thread';
import type { Sandbox } from '../sandbox/sandbox';
import { overlaySnapshot } from '../workspace/overlay-snapshot';
import { BaseMismatchError } from '../workspace/hydrate-base';
import { collectThreadResult, overlayOf } from '../workspace/thread-result';
import { debugLog } from '../common/debug-log';

/** How many changed paths the live feed may leave as hints for collect. */
const MAX_CHANGE_HINTS = 100_000;
/** Paths one file_changed event carries at most (the live view refetches anyway). */
const MAX_EVENT_PATHS = 1000;

/**
 * A run's steps (docs/architecture.md §1), in order: prepare, hydrate, network, agent, collect, wipe.
 * Each reads what the steps before it left on the `LiveRun` and adds its own part. `runSteps`
 * orders them: an agent that fails still has its result collected, and wipe always runs last.
 */

/** Reads the project, makes sure the image exists, creates the sandbox. */
export async function prepareStep(host: StepHost, run: LiveRun): Promise<void> {
  const { input } = run;
  await host.transition(run, 'preparing', 'reading project');
  // The project is read while the environment, the image, the base's volumes and the sandbox are made
  // (none of them needs it): the scan of a large project is off the run's start (docs/architecture.md §11).
  const scanning = host.workspace.snapshot(input.projectDir, run.spec.kind === 'session' ? run.spec.control.snapshot : undefined);
  scanning.catch(() => undefined);
  await host.update(run, { phase: 'preparing image' });
  throwIfStopped(run);

  const onProgress = (p: { phase: string; message: string }) => {
    if (p.phase === 'build') host.updateLater(run, { phase: `building image: ${p.message}`.slice(0, 200) });
  };
  // The project's environment (docs/architecture.md §16): a derived image, or Airlock's own.
  const environment = host.deps.environment ? await host.deps.environment({ ...input, agentVariant: imageVariantOf(run.spec) }, onProgress) : undefined;
  if (environment) {
    run.environmentEnv = environment.env;
    if (environment.setup) run.setup = environment.setup;
    if (environment.prepared) run.prepared = environment.prepared;
    await host.update(run, { environment: environment.record });
    await run.audit.append('note', { message: environmentNote(environment.record) });
    const rec = environment.record;
    // The CLI and the UI show it before setup starts: what runs, what is not applied, and a fallback's reason (§16).
    host.emitEvent(run, { type: 'environment', name: rec.name, kind: rec.kind, notApplied: rec.notApplied, ...(rec.fallback ? { fallback: rec.fallback } : {}) });
    for (const n of rec.notApplied) run.terminal.write(`\x1b[33m[airlock] not applied: ${n.field}: ${n.reason}\x1b[0m\r\n`);
  }
  const image = environment?.image ?? (await host.deps.image(imageVariantOf(run.spec), onProgress, input.isolation));
  await host.update(run, { phase: 'starting sandbox' });
  const manager = await host.deps.sandboxes(input.isolation);
  const sidecars = environment?.sidecars;
  let joined: { name: string; extraHosts?: string[]; dns?: SandboxSpec['dns'] } | undefined;
  if (sidecars) {
    if (input.network === 'open') throw new AirlockError('INVALID_INPUT', "Compose services run on the run's internal network, which the open network policy would leave; use the none or allowlist policy for a compose devcontainer.", { field: 'network' });
    joined = await sidecars.createNetwork(run.id);
  }
  let sandbox: Sandbox;
  const limits = host.deps.limits ?? DEFAULT_LIMITS;
  const network = input.network === 'open' ? 'open' : 'none';
  // A project environment's container sandbox is made from the image's id: the warm pool is keyed by
  // it, so a rebuilt image or a re-made prepared environment never gets an older sandbox (§16).
  const byId = environment?.imageId && input.isolation !== 'vm' ? environment.imageId : undefined;
  if (byId && !joined) run.warmNext = { image: byId, limits, network };
  // Airlock's own image in a container, a first turn: the sandbox may start from the project's base (§11).
  const bases = host.deps.bases;
  // (The environment step answers for Airlock's own image too: kind 'airlock', no image of its own.)
  const ownImage = !environment || (environment.record.kind === 'airlock' && !environment.image && !environment.setup && !environment.sidecars);
  run.refreshBase = !!bases && ownImage && !joined && (input.isolation ?? 'container') === 'container' && run.spec.kind === 'agent' && !run.spec.continuation;
  if (bases && run.refreshBase) {
    const claim = await bases.claim(run.id, input.projectDir).catch((err: unknown) => ({ reason: (err as Error).message }));
    if ('record' in claim) {
      run.base = claim;
      run.sandboxWithoutBase = () => manager.create({ runId: run.id, image, limits, network });
    }
    await run.audit.append('note', { message: 'record' in claim ? `the workspace starts from the project's base on the engine (${claim.record.volume}, written ${claim.record.createdAt}); only what differs is copied in` : `the project is copied in whole: ${claim.reason}` });
  }
  try {
    sandbox = await manager.create({ runId: run.id, image: byId ?? image, limits, network, ...(run.base ? { volumesReady: true } : {}), ...(joined ? { joinNetwork: joined.name, ...(joined.extraHosts ? { extraHosts: joined.extraHosts } : {}), ...(joined.dns ? { dns: joined.dns } : {}) } : {}) });
  } catch (err) {
    // No sandbox, so no wipe step to take the network with it.
    if (sidecars) await sidecars.remove(run.id).catch(() => undefined);
    throw err;
  }
  run.sandbox = sandbox;
  watchConnectionCap(host, run, sandbox);
  const snapshot = await scanning;
  run.snapshot = snapshot;
  const excludedFiles = snapshot.excluded.map((e) => ({ path: e.path, reason: e.reason }));
  if (excludedFiles.length) await run.audit.append('excluded_files', { files: excludedFiles });
  await host.update(run, { excludedFiles });
  throwIfStopped(run);
  if (sidecars) {
    await host.update(run, { phase: `starting services: ${sidecars.services.join(', ')}` });
    run.terminal.write(`\x1b[36m[airlock] compose services: ${sidecars.services.join(', ')} (hardened, on the run's internal network, no route out)\x1b[0m\r\n`);
    await sidecars.start(run.id, run.stop.signal);
    await run.audit.append('note', { message: `compose services started and ready: ${sidecars.services.join(', ')}; internal network ${joined?.name}, no route out; they go with the run's wipe` });
  }
  watchPreviews(run, sandbox);
  const accel = vmAccelOf(sandbox.info);
  const engine = sandbox.info.engine;
  await host.update(run, (r) => ({ ...r, sandbox: { ...r.sandbox, image, id: sandbox.info.id, ...accel, ...(engine ? { engine: engine.description } : {}) } }));
  if (accel.accelNote) await run.audit.append('note', { message: `VM accelerator ${accel.accel}: ${accel.accelNote}` });
  // Where the project copy went is part of the record (docs/architecture.md §13).
  if (engine?.remote) await run.audit.append('note', { message: `sandbox on a remote engine: ${engine.description}; the project copy and the run token are there, provider keys stay on this machine` });
  throwIfStopped(run);
}

/** Published preview ports close with the run (or with the sandbox they were made for, if it is replaced). */
function watchPreviews(run: LiveRun, sandbox: Sandbox): void {
  run.previews?.dispose();
  run.previews = run.disposables.add(new PreviewPorts(sandbox.channel));
  run.disposables.add(
    run.previews.onDidChange((e) => {
      if (e.type === 'published') run.terminal.write(`\r\n\x1b[36m[airlock] preview: sandbox port ${e.sandboxPort} → ${e.url}\x1b[0m\r\n`);
    }),
  );
}

/**
 * The project base failed its check at the copy (docs/architecture.md §11, "Trust"): the sandbox made
 * from it goes (nothing ran in it but the copy), the base is removed, and the run goes on in a sandbox
 * made afresh, with the project copied in whole. Said in the terminal and the audit log.
 */
async function fallBackFromBase(host: StepHost, run: LiveRun, err: BaseMismatchError): Promise<Sandbox> {
  const claim = required(run.base, 'hydrate', 'prepare');
  const remake = required(run.sandboxWithoutBase, 'hydrate', 'prepare');
  run.terminal.write(`\x1b[33m[airlock] the project's base on the engine failed its check; it is removed and the project is copied in whole\x1b[0m\r\n`);
  await run.audit.append('note', { message: `base_check_failed: ${err.message}` });
  const old = required(run.sandbox, 'hydrate', 'prepare');
  run.sandbox = undefined;
  run.base = undefined;
  const proof = await old.destroy();
  if (proof.leftovers.length) await run.audit.append('note', { message: `the sandbox made from the base left: ${proof.leftovers.join(', ')}` });
  // Only now is no live run's overlay reading it, so it can go.
  await host.deps.bases?.discard(claim.record).catch(debugLog.swallow('run.base.discard'));
  const sandbox = await remake();
  run.sandbox = sandbox;
  watchConnectionCap(host, run, sandbox);
  watchPreviews(run, sandbox);
  await host.update(run, (r) => ({ ...r, sandbox: { ...r.sandbox, id: sandbox.info.id } }));
  await run.audit.append('note', { message: 'the project is copied in whole into a new sandbox (the base was not used)' });
  return sandbox;
}

/** The audit's words for the environment that runs: its name, the image id, what was not applied. */
function environmentNote(e: RunEnvironment): string {
  const image = e.imageId ? `; image ${e.image} (${e.imageId}) derived from ${e.baseImage} (${e.baseImageId})` : '';
  const not = e.notApplied.length ? `; not applied: ${e.notApplied.map((n) => n.field).join(', ')}` : '';
  const local = e.localEnvUsed?.length ? `; host variables allowed by name: ${e.localEnvUsed.join(', ')}` : '';
  return `environment ${e.name}${image}${not}${local}`;
}

/** A VM sandbox's accelerator and why, and how it started (QemuSandboxInfo), for the run record; nothing for containers. */
function vmAccelOf(info: object): { accel?: 'kvm' | 'hvf' | 'tcg'; accelNote?: string; vmStartedFrom?: 'snapshot' | 'boot' } {
  const i = info as { accel?: unknown; accelReason?: unknown; accelRetry?: unknown; startedFrom?: unknown };
  if (i.accel !== 'kvm' && i.accel !== 'hvf' && i.accel !== 'tcg') return {};
  const note = typeof i.accelRetry === 'string' && i.accelRetry ? i.accelRetry : typeof i.accelReason === 'string' ? i.accelReason : '';
  const from = i.startedFrom === 'snapshot' || i.startedFrom === 'boot' ? i.startedFrom : undefined;
  return { accel: i.accel, ...(note ? { accelNote: note } : {}), ...(from ? { vmStartedFrom: from } : {}) };
}

/** Copies the project into the sandbox; the host keeps the same bytes as its own baseline. */
export async function hydrateStep(host: StepHost, run: LiveRun): Promise<void> {
  const sandbox = required(run.sandbox, 'hydrate', 'prepare');
  await host.update(run, { phase: 'copying project' });
  const spec = run.spec.kind === 'agent' ? run.spec : undefined;
  // A follow-up's conversation goes into place while the project streams in (off the agent's critical path).
  if (spec?.agent.session) run.sessionRestored = restoreAgentSession(run, spec, sandbox);
  // A follow-up turn starts from the previous result: laid over the project, it is this run's baseline.
  if (spec?.continuation) run.snapshot = overlaySnapshot(required(run.snapshot, 'hydrate', 'prepare'), await overlayOf(spec.continuation.previous));
  const gitHistory = run.input.gitHistory ?? DEFAULT_GIT_HISTORY;
  // A reused prepared environment's home goes into place while the project streams in (§16, "The prepared path").
  if (run.setup && run.prepared?.reuse) {
    run.preparedHome = restorePreparedHome(sandbox);
    run.preparedHome.catch(debugLog.swallow('run.prepared-home'));
  }
  const objects = resultPaths(host.deps.store, run.id).objects;
  const snapshot = required(run.snapshot, 'hydrate', 'prepare');
  try {
    run.hydrated = await host.workspace.hydrate(sandbox, snapshot, objects, { gitHistory, ...(run.base ? { base: run.base } : {}) });
  } catch (err) {
    // A base changed on the engine is removed, never used again; this run goes on with a whole copy.
    if (!(err instanceof BaseMismatchError && run.base)) throw err;
    const fresh = await fallBackFromBase(host, run, err);
    await rm(objects, { recursive: true, force: true });
    run.hydrated = await host.workspace.hydrate(fresh, snapshot, objects, { gitHistory });
  }
  const repo = run.hydrated.sandboxRepo;
  if (repo) {
    const what = repo.kind === 'fresh' ? 'a fresh repository (one commit of the copied-in files)' : `${repo.commits} commit(s) of the project's history (git history ${gitHistory})${repo.rewritten ? ', with the files left out of the copy removed from every commit' : ''}`;
    await run.audit.append('note', { message: `The sandbox's git repository holds ${what}${repo.note ? `; ${repo.note}` : ''}. It is never read back: the result is the workspace's files against the host's baseline.` });
  }
  throwIfStopped(run);
}

/**
 * The sandbox hit its cap of open connections into host services (docs/architecture.md §4): the run
 * view (a typed event), the audit log and `--json` say what was refused; never a silent reset.
 */
function watchConnectionCap(host: StepHost, run: LiveRun, sandbox: Sandbox): void {
  run.disposables.add(
    sandbox.channel.onDidRefuseConnections((e) => {
      host.emitEvent(run, { type: 'connections_refused', service: e.service.slice(0, 100), limit: e.limit, refused: e.refused, ended: e.ended });
      host.auditLater(run, 'connections_refused', { service: e.service, limit: e.limit, refused: e.refused, ended: e.ended });
      if (!e.ended) run.terminal.write(`\r\n\x1b[33m[airlock] the sandbox has ${e.limit} connections open into the host (its limit): a connection to the ${e.service} was refused\x1b[0m\r\n`);
    }),
  );
}

/**
 * Mints the run token and makes the model proxy appear inside the sandbox on loopback, through the
 * channel (docs/architecture.md §4); sets up the egress proxy for a wider policy than `none`.
 */
export async function networkStep(host: StepHost, run: LiveRun, spec: AgentRunSpec): Promise<void> {
  const { id } = run;
  const input = spec.args;
  const sandbox = required(run.sandbox, 'network', 'prepare');
  const grant = run.disposables.add(
    host.deps.proxy.issueToken({
      runId: id,
      providers: [input.provider],
      agent: input.agent,
      // The run's turn boundary as the host sees it: checkpoints (docs/architecture.md §19).
      beforeForward: () => run.checkpoints?.turnEnded() ?? Promise.resolve(),
      budget: {
        ...(input.limits.budgetTokens ? { maxTokens: input.limits.budgetTokens } : {}),
        ...(input.limits.budgetUsd ? { maxCostUsd: input.limits.budgetUsd } : {}),
      },
    }),
  );
  const exposed = run.disposables.add(await sandbox.channel.exposeHostService(0, () => connect(host.deps.proxyPort, '127.0.0.1'), { name: 'model proxy' }));
  // A subscription credential: placeholders for the client's own credential slot (§6).
  const credential = await host.deps.proxy.sandboxCredential?.(id, grant.token);
  run.grant = { token: grant.token, sandboxPort: exposed.port, ...(credential ? { credential } : {}) };
  if (credential) await run.audit.append('note', { message: `subscription credential '${input.provider}' (${credential.kind}) serves this ${input.agent} run; the sandbox holds only run-scoped placeholders in its place` });
  run.tokenBytes = Buffer.from(grant.token);
  await policyStep(host, run);
  await mcpStep(host, run, spec);
}

/**
 * The run's MCP gateway (docs/architecture.md §20): the user's servers named for the run, connected
 * on the host with their credentials, appear inside the sandbox as one endpoint on loopback through
 * the channel, under a token of the run's own; the gateway and its token go with the run.
 */
async function mcpStep(host: StepHost, run: LiveRun, spec: AgentRunSpec): Promise<void> {
  const names = spec.args.mcpServers ?? [];
  if (names.length === 0) return;
  if (!host.deps.mcpGateway) throw new AirlockError('INTERNAL', 'the MCP gateway is not wired in this build');
  const sandbox = required(run.sandbox, 'network', 'prepare');
  await host.update(run, { phase: `connecting MCP servers: ${names.join(', ')}` });
  const gateway = run.disposables.add(await host.deps.mcpGateway({ runId: run.id, projectDir: path.resolve(run.input.projectDir), servers: names, ...(run.input.isolation ? { isolation: run.input.isolation } : {}), approvals: run.input.networkApprovals ?? 'ask' }));
  const exposed = run.disposables.add(await sandbox.channel.exposeHostService(0, () => gateway.connect(), { name: 'MCP gateway' }));
  run.mcp = { gateway, sandboxPort: exposed.port };
  await run.audit.append('mcp', { event: 'open', servers: gateway.record.servers });
  run.disposables.add(
    gateway.onDidCall((c) => {
      host.auditLater(run, 'mcp', { event: 'call', server: c.server, tool: c.tool, argsSha256: c.argsSha256, argsBytes: c.argsBytes, decision: c.decision, ...(c.by ? { by: c.by } : {}), ...(c.reason ? { reason: c.reason } : {}), resultBytes: c.resultBytes, isError: c.isError, ...(c.capped ? { capped: true } : {}), durationMs: c.durationMs });
      host.emitEvent(run, { type: 'mcp_call', server: c.server, tool: c.tool.slice(0, 200), decision: c.decision, ...(c.by ? { by: c.by.slice(0, 40) } : {}), ...(c.reason ? { reason: c.reason.slice(0, 500) } : {}), isError: c.isError, durationMs: c.durationMs });
      if (c.decision === 'deny') run.terminal.write(`\r\n\x1b[33m[airlock] MCP: refused ${c.server}/${c.tool}: ${c.reason ?? 'denied'}\x1b[0m\r\n`);
    }),
  );
  const questions = gateway.questions;
  if (questions) {
    // A call waits for the user (its rule asks, or its description is not the one pinned): a typed
    // event (the run view's prompt, the CLI's), an audit record and a notification; the answer likewise.
    run.disposables.add(
      questions.onDidAsk((q) => {
        host.emitEvent(run, { type: 'mcp_approval', ...q });
        const now = q.why === 'policy' ? undefined : gateway.tools.find((t) => t.server === q.server && t.tool === q.tool)?.descriptionHash;
        host.auditLater(run, 'mcp', { event: 'ask', id: q.id, server: q.server, tool: q.tool, why: q.why, ...(now ? { descriptionSha256: now } : {}) });
        host.deps.notify?.({ runId: run.id, title: q.why === 'policy' ? 'An MCP tool call is waiting for you' : 'An MCP tool changed since you enabled it', body: `${q.server}/${q.tool}`.slice(0, 200) });
        run.terminal.write(`\r\n\x1b[33m[airlock] MCP: ${q.server}/${q.tool} waits for your answer${q.why === 'changed' ? ' (its description changed since you enabled the server)' : q.why === 'new' ? ' (not among the tools pinned when you enabled the server)' : ''}\x1b[0m\r\n`);
      }),
    );
    run.disposables.add(
      questions.onDidResolve((r) => {
        host.emitEvent(run, { type: 'mcp_approval_resolved', id: r.id, answer: r.answer, by: r.by });
        host.auditLater(run, 'mcp', { event: 'answer', id: r.id, server: r.question.server, tool: r.question.tool, answer: r.answer, by: r.by });
      }),
    );
  }
  const tools = gateway.record.servers.map((s) => `${s.name} (${s.tools} tools)`).join(', ');
  run.terminal.write(`\x1b[36m[airlock] MCP gateway: ${tools}; credentials stay on this machine\x1b[0m\r\n`);
  for (const s of gateway.record.servers) {
    if (s.changed?.length) run.terminal.write(`\x1b[33m[airlock] MCP: ${s.name}'s tool description(s) changed since you enabled it: ${s.changed.join(', ')} (their calls ask first)\x1b[0m\r\n`);
  }
}

/**
 * Sets up the run's network policy: `none` is recorded; a wider one starts the egress proxy, and is
 * returned (its environment is what the sandbox's processes need to reach it).
 */
async function policyStep(host: StepHost, run: LiveRun): Promise<RunNetwork | undefined> {
  const { input, id } = run;
  const sandbox = required(run.sandbox, 'network', 'prepare');
  if (input.network === 'none') {
    await run.audit.append('network', { policy: 'none' });
    return undefined;
  }
  if (!host.deps.network) throw new AirlockError('INTERNAL', 'network policies are not wired in this build');
  const net = run.disposables.add(await host.deps.network(sandbox, { runId: id, policy: input.network, allowlist: input.allowlist ?? [], egressRules: input.egressRules ?? [], secrets: input.secrets ?? [], internalHosts: input.internalHosts ?? [], networkApprovals: input.networkApprovals ?? 'ask', projectDir: path.resolve(input.projectDir) }));
  run.network = net;
  await run.audit.append('network', { policy: input.network, allow: net.record.allow, ...(net.record.internalHosts?.length ? { internalHosts: net.record.internalHosts } : {}), ...(net.record.gateway ? { gateway: net.record.gateway } : {}) });
  if (net.record.warning) run.terminal.write(`\x1b[33m[airlock] ${net.record.warning}\x1b[0m\r\n`);
  run.disposables.add(
    net.onDidConnect((e) => {
      // An intercepted request is audited in full: method, redacted path, status, bytes, rule, secret by name.
      host.auditLater(run, 'network', {
        policy: input.network,
        host: e.host,
        port: e.port,
        allowed: e.allowed,
        ...(e.intercepted ? { intercepted: true, method: e.method, path: e.path, status: e.status, bytesUp: e.bytesUp, bytesDown: e.bytesDown, ...(e.rule ? { rule: e.rule } : {}), ...(e.secret ? { secret: e.secret } : {}), ...(e.reason ? { reason: e.reason } : {}) } : {}),
      });
      if (e.allowed) return;
      // The typed event is what the UI and CLI act on; the terminal line is for people only.
      host.emitEvent(run, {
        type: 'network_blocked',
        host: e.host.slice(0, 300),
        port: e.port,
        method: e.method.slice(0, 20),
        ...(e.reason ? { reason: e.reason.slice(0, 500) } : {}),
        ...(e.path ? { path: e.path.slice(0, 500) } : {}),
        ...(e.rule ? { rule: e.rule.slice(0, 400) } : {}),
      });
      run.terminal.write(`\r\n\x1b[33m[airlock] blocked ${e.method} ${e.host}:${e.port}: ${e.reason ?? 'not on the allow-list'}\x1b[0m\r\n`);
    }),
  );
  // A command secret's command ran on the host: audited and said, never its value (docs/architecture.md §2.8).
  if (net.onDidFetchSecret) {
    run.disposables.add(
      net.onDidFetchSecret((f) => {
        host.auditLater(run, 'network', { policy: input.network, secretFetch: { secret: f.secret, trigger: f.trigger, ok: f.ok, ...(f.error ? { error: f.error.slice(0, 500) } : {}), durationMs: f.durationMs } });
        const what = f.trigger === '401' ? 'fetched again after a 401' : f.trigger === 'expired' ? 'fetched again (its life ran out)' : 'fetched on first use';
        run.terminal.write(f.ok ? `\r\n\x1b[36m[airlock] secret ${f.secret} ${what} by its host command\x1b[0m\r\n` : `\r\n\x1b[33m[airlock] secret ${f.secret} could not be fetched: ${f.error ?? 'the command failed'}\x1b[0m\r\n`);
      }),
    );
  }
  watchApprovals(host, run, net);
  return net;
}

/** Network questions put to the user (gateway runs): events, audit records and a notification. */
function watchApprovals(host: StepHost, run: LiveRun, net: RunNetwork): void {
  const { input, id } = run;
  const approvals = net.approvals;
  if (!approvals) return;
  // A request waits for the user, or the agent proposes a rule: a typed event (the UI's banner, the
  // CLI's prompt) and an audit record; the answer is recorded the same way (docs/architecture.md §2.8).
  run.disposables.add(
    approvals.onDidAsk((q) => {
      host.emitEvent(run, { type: 'network_approval', ...q });
      host.auditLater(run, 'network', { policy: input.network, host: q.host, port: q.port, approval: { id: q.id, kind: q.kind, method: q.method, path: q.path, ...(q.rule ? { rule: q.rule } : {}), ...(q.deniedBy ? { deniedBy: q.deniedBy } : {}), ...(q.reason ? { reason: q.reason } : {}), asked: true } });
      host.deps.notify?.({ runId: id, title: q.kind === 'proposal' ? 'The agent proposes a network rule' : 'A request is waiting for you', body: `${q.method} ${q.host}${q.path}`.slice(0, 200) });
      run.terminal.write(`\r\n\x1b[33m[airlock] ${q.kind === 'proposal' ? `the agent proposes the rule "${q.rule}"` : `${q.method} ${q.host}${q.path} waits for your answer (refused by ${q.deniedBy})`}\x1b[0m\r\n`);
    }),
  );
  run.disposables.add(
    approvals.onDidResolve((r) => {
      host.emitEvent(run, { type: 'network_approval_resolved', id: r.id, answer: r.answer, by: r.by });
      host.auditLater(run, 'network', { policy: input.network, host: r.request.host, port: r.request.port, allowed: r.answer !== 'deny', approval: { id: r.id, kind: r.request.kind, method: r.request.method, path: r.request.path, ...(r.request.rule ? { rule: r.request.rule } : {}), answer: r.answer, by: r.by } });
    }),
  );
}

/** Starts the agent with provider settings that point at the proxy and the run token as its key. */
export async function agentStep(host: StepHost, run: LiveRun, spec: AgentRunSpec): Promise<void> {
  const input = spec.args;
  const sandbox = required(run.sandbox, 'agent', 'prepare');
  const grant = required(run.grant, 'agent', 'network');
  run.disposables.add(
    await host.workspace.watch(sandbox, (paths) => {
      // Kept (bounded) as a hint for collect: the result itself is read and derived on the host.
      for (const p of paths) if (run.changeHints.size < MAX_CHANGE_HINTS) run.changeHints.add(p);
      run.checkpoints?.markChanged();
      // A hint, and its size is the sandbox's choice: the event carries a bounded sample.
      host.emitEvent(run, { type: 'file_changed', paths: paths.length > MAX_EVENT_PATHS ? paths.slice(0, MAX_EVENT_PATHS) : paths });
      host.filesChanged(run);
    }),
  );
  run.checkpoints = startCheckpoints(host, run, spec, sandbox);
  await host.transition(run, 'running', 'agent working');
  const ctx: AgentCommandContext = {
    task: input.task,
    model: input.model,
    providerFormat: await host.deps.providerFormat(input.provider),
    proxyBaseUrl: `http://127.0.0.1:${grant.sandboxPort}`,
    token: grant.token,
    approval: input.approval,
    ...(input.customCommand ? { customCommand: input.customCommand } : {}),
    ...(grant.credential ? { credential: grant.credential } : {}),
    ...(run.mcp ? { mcp: { url: `http://127.0.0.1:${run.mcp.sandboxPort}/mcp`, token: run.mcp.gateway.token } } : {}),
  };
  if (spec.agent.session) ctx.session = { id: spec.sessionId, resume: await (run.sessionRestored ?? false) };
  const command = spec.agent.command(ctx);
  const env: Record<string, string> = { ...(run.environmentEnv ?? {}), ...proxyEnvFor(grant.sandboxPort, grant.token), ...(run.network?.env ?? {}), ...command.env };
  for (const name of command.unsetEnv ?? []) delete env[name];
  run.commandEnv = commandEnv(env);
  await host.runAgent(run, spec.agent, command.argv, env, command.cwd);
}

/**
 * An MCP session's middle (docs/architecture.md §17): the sandbox is live for the client's commands
 * until the session ends. No run token was minted: nothing in the sandbox can reach a model.
 */
export async function sessionStep(host: StepHost, run: LiveRun, session: SessionControl): Promise<void> {
  const sandbox = required(run.sandbox, 'session', 'prepare');
  run.disposables.add(
    await host.workspace.watch(sandbox, (paths) => {
      for (const p of paths) if (run.changeHints.size < MAX_CHANGE_HINTS) run.changeHints.add(p);
      host.filesChanged(run);
    }),
  );
  throwIfStopped(run);
  await host.transition(run, 'running', `MCP session: ${session.client}`.slice(0, 200));
  session.markReady();
  await session.ended;
  session.open = false;
  for (const c of run.hostCommands) c.kill('SIGKILL');
  await run.audit.append('note', { message: `MCP session ended: ${session.endReason ?? 'ended'}` });
  throwIfStopped(run);
}

/** Derives the result on the host and stores it with the run: patch, changed files, baseline. Returns how many files changed. */
export async function collectStep(host: StepHost, run: LiveRun): Promise<number> {
  const spec = run.spec.kind === 'agent' ? run.spec : undefined;
  const sandbox = required(run.sandbox, 'collect', 'prepare');
  const hydrated = required(run.hydrated, 'collect', 'hydrate');
  await host.transition(run, 'collecting', 'collecting the result');
  await run.checkpoints?.settle();
  const { result, patch } = await host.workspace.collect(sandbox, { snapshot: required(run.snapshot, 'collect', 'prepare'), hydrated, hints: run.changeHints });
  // The result is the run's last checkpoint (recorded before the store is compacted, which keeps their blobs).
  await run.checkpoints?.finish({ result, patch }).catch((err: unknown) => run.audit.append('note', { message: `checkpoints not kept: ${toErrorInfo(err).message}` }));
  const thread = spec?.continuation ? await collectThreadResult(hydrated.repo, result, spec.continuation.previous) : undefined;
  await host.workspace.store(host.deps.store, run.id, { result, patch }, thread);
  if (spec) await keepAgentSession(host, run, spec, sandbox);
  if (result.changes.length) {
    await run.audit.append('file_change', { changes: result.changes.map((c) => ({ path: c.path, kind: c.status, ...(c.oldPath ? { oldPath: c.oldPath } : {}) })) });
  }
  await host.update(run, {
    changedFiles: result.changes.map((c) => toChangedFile(c)),
    patchPath: host.deps.store.paths(run.id).patch,
    baseline: { commit: result.baseCommit, ...(result.headCommit ? { headCommit: result.headCommit } : {}) },
  });
  return result.changes.length;
}

/**
 * The run's checkpointer (docs/architecture.md §19): the same collect as the result's, per turn.
 * The built-in agent's transcript is kept with each checkpoint, for Continue from here.
 */
function startCheckpoints(host: StepHost, run: LiveRun, spec: AgentRunSpec, sandbox: Sandbox): Checkpointer | undefined {
  const hydrated = run.hydrated;
  const snapshot = run.snapshot;
  if (!hydrated?.hostBaseline || !snapshot) return undefined;
  const baseCommit = hydrated.hostBaseline;
  baseCommit.catch(() => undefined);
  return new Checkpointer({
    store: host.deps.store,
    runId: run.id,
    shell: sandbox.channel,
    collect: ({ ref, maxResultBytes }) => host.workspace.collect(sandbox, { snapshot, hydrated, hints: run.changeHints, ref, maxResultBytes }),
    baseCommit,
    tracksDeps: hydrated.manifest.some((f) => /(^|\/)node_modules\//.test(f.path)),
    audit: run.audit,
    ...(spec.agent.session && spec.args.agent === 'builtin' ? { session: { spec: spec.agent.session, id: spec.sessionId, ...(run.tokenBytes ? { token: run.tokenBytes } : {}) } } : {}),
    onRecorded: () => {
      // Viewers refetch the timeline with the file list (diffs:onDidChange).
      host.filesChanged(run);
    },
  });
}

/**
 * A follow-up turn's conversation: the parent agent's session files, put where the agent keeps them.
 * Resolves with whether the agent resumes (never rejects); a session that cannot be put back means
 * a fresh conversation.
 */
async function restoreAgentSession(run: LiveRun, spec: AgentRunSpec, sandbox: Sandbox): Promise<boolean> {
  const session = spec.continuation?.session;
  if (!session || !spec.agent.session) return false;
  try {
    await restoreSession(sandbox.channel, spec.agent.session, session);
    return true;
  } catch (err) {
    const message = `the previous conversation could not be put in place (${toErrorInfo(err).message}); the agent starts a fresh one`;
    await run.audit.append('note', { message }).catch(debugLog.swallow('run.audit.note'));
    run.terminal.write(`\x1b[33m[airlock] ${message}\x1b[0m\r\n`);
    return false;
  }
}

/**
 * Keeps the agent's session files with the run, for a follow-up turn (docs/architecture.md §15).
 * Hostile bytes, read under caps with the run token removed; a failure loses only the follow-up's
 * memory, never the run.
 */
async function keepAgentSession(host: StepHost, run: LiveRun, spec: AgentRunSpec, sandbox: Sandbox): Promise<void> {
  if (!spec.agent.session) return;
  try {
    const session = await captureSession(sandbox.channel, spec.agent.session, spec.sessionId, run.tokenBytes);
    if (!session) return;
    await saveSession(sessionFile(host.deps.store, run.id), session);
    await run.audit.append('note', { message: 'kept the agent session for a follow-up', files: session.files.map((f) => ({ path: f.path, bytes: f.bytes, sha256: f.sha256 })) });
  } catch (err) {
    await run.audit.append('note', { message: `the agent session was not kept for a follow-up: ${toErrorInfo(err).message}` });
  }
}

/**
 * Destroys the sandbox and checks by label that nothing remains, then revokes the run token. Runs
 * on every path, also when an earlier step failed; a wipe that leaves something fails the run.
 */
export async function wipeStep(host: StepHost, run: LiveRun, failure: ErrorInfo | undefined): Promise<{ failure: ErrorInfo | undefined; wipe?: StoredRun['wipe'] }> {
  await host.transition(run, 'wiping', 'wiping the sandbox');
  let wipe: StoredRun['wipe'];
  try {
    if (run.sandbox) {
      const proof = await run.sandbox.destroy();
      // A warm-pool sandbox keeps the names it was started under: say which pool id they carry, so the proof
      // can relate them to this run (the run id is what the user saw).
      const pooled = proof.labelRunId ? { pooledAs: proof.labelRunId } : {};
      wipe = { verified: proof.leftovers.length === 0, removed: proof.removed, leftovers: proof.leftovers, ...pooled, durationMs: proof.durationMs, at: proof.verifiedAt };
      await run.audit.append('wipe', { removed: wipe.removed, leftovers: wipe.leftovers, ...pooled, durationMs: proof.durationMs, verifiedAt: wipe.at, verified: wipe.verified });
      // Verified gone: the next run on this environment's image finds a started sandbox (the app's pool, §16),
      // of the prepared image once it is committed (run-setup.ts).
      await run.preparedKept;
      if (!proof.leftovers.length && run.warmNext) host.deps.warmEnvironment?.(run.input.isolation, run.warmNext);
      // The project as it is now becomes the next run's base, off this run's path and the next one's (§11).
      if (run.refreshBase && run.hydrated) void host.deps.bases?.refresh(run.input.projectDir, { files: run.hydrated.files, bytes: run.hydrated.bytes });
      if (proof.leftovers.length) failure ??= { kind: 'SANDBOX_FAILED', message: `The sandbox could not be fully removed: ${proof.leftovers.join(', ')} remain. 'airlock doctor' reaps leftovers.` };
    }
  } catch (err) {
    const info = toErrorInfo(err);
    if (info.kind === 'DOCKER_UNREACHABLE') {
      // The engine is out of reach (a remote link dropped): nothing could be removed or checked there.
      // What was collected is already stored on the host; the sandbox is wiped once the engine answers.
      const message = `${info.message} The remote wipe could not be verified; Airlock removes the sandbox (label airlock.run=${run.sandbox?.info.runId ?? run.id}) and checks it is gone before the next run on that engine or at the next start.`;
      wipe = { verified: false, removed: [], leftovers: ['unverified: engine unreachable'], at: new Date().toISOString() };
      await run.audit.append('wipe', { removed: [], leftovers: wipe.leftovers, verified: false, durationMs: 0, verifiedAt: wipe.at, unverified: info.message }).catch(debugLog.swallow('run.audit.wipe'));
      // The link is the cause of a channel that closed under the run, too: say so, not "channel closed".
      failure = !failure || failure.kind === 'CHANNEL_CLOSED' ? { kind: 'DOCKER_UNREACHABLE', message } : { ...failure, message: `${failure.message} ${message}` };
    } else {
      failure ??= { kind: info.kind, message: `Wiping the sandbox failed: ${info.message}` };
      await run.audit.append('error', { kind: info.kind, message: `wipe failed: ${info.message}` }).catch(debugLog.swallow('run.audit.wipe-error'));
    }
  } finally {
    host.deps.proxy.revokeRun(run.id);
    // The run's record is final only once its prepared environment is kept or its failure noted.
    await run.preparedKept;
  }
  return { failure, ...(wipe ? { wipe } : {}) };
}

/**
 * Runs the run's pipeline: the agent run's or the session's, each over the shared steps. An agent
 * that fails (budget, timeout, crash) still has its diff so far collected for review; whatever fails,
 * the step-scoped resources are released and the sandbox is wiped. Returns the run's failure, if
 * any, and the wipe's proof.
 */
export async function runSteps(host: StepHost, run: LiveRun): Promise<{ failure: ErrorInfo | undefined; wipe?: StoredRun['wipe'] }> {
  let failure: ErrorInfo | undefined;
  try {
    const { spec } = run;
    if (spec.kind === 'agent') await agentPipeline(host, run, spec);
    else await sessionPipeline(host, run, spec.control);
  } catch (err) {
    failure = await recordFailure(run, err);
  } finally {
    run.disposables.dispose();
  }
  return wipeStep(host, run, failure);
}

/** An agent run: prepare, hydrate, setup, network (run token, egress, MCP gateway), agent, check, collect. */
async function agentPipeline(host: StepHost, run: LiveRun, spec: AgentRunSpec): Promise<void> {
  await prepareStep(host, run);
  await hydrateStep(host, run);
  // Lifecycle commands, before the run token exists (docs/architecture.md §16).
  await setupStep(host, run, run.setup);
  await networkStep(host, run, spec);
  const agentFailure = await agentStep(host, run, spec).then(
    () => undefined,
    (err: unknown) => err,
  );
  // With a check (§18), nothing the agent started outlives it: not into collect, not into the check.
  const check = spec.args.check;
  const swept = check ? await stopLeftoverProcesses(run.sandbox) : 0;
  const changed = await collectStep(host, run);
  if (check) await checkStep(host, run, check, swept);
  if (agentFailure) throw withChangesNote(agentFailure, changed);
}

/** An MCP session (§17): prepare, hydrate, setup, the network policy (no run token), the client's use, collect. */
async function sessionPipeline(host: StepHost, run: LiveRun, control: SessionControl): Promise<void> {
  await prepareStep(host, run);
  await hydrateStep(host, run);
  await setupStep(host, run, run.setup);
  const net = await policyStep(host, run);
  // The client's commands get the project environment's variables (containerEnv, the image's ENV) and reach
  // the egress proxy, as an agent's do.
  run.commandEnv = commandEnv({ ...(run.environmentEnv ?? {}), ...(net?.env ?? {}) });
  const sessionFailure = await sessionStep(host, run, control).then(
    () => undefined,
    (err: unknown) => err,
  );
  const changed = await collectStep(host, run);
  if (sessionFailure) throw withChangesNote(sessionFailure, changed);
}

/** An agent failure, saying whether there is anything to review (only when there is). */
function withChangesNote(err: unknown, changed: number): unknown {
  if (!(err instanceof AirlockError) || !changed) return err;
  const note = `The ${changed === 1 ? 'change' : `${changed} changed files`} so far ${changed === 1 ? 'is' : 'are'} kept for review.`;
  return new AirlockError(err.kind, `${err.message} ${note}`, err.field ? { field: err.field } : undefined);
}

/** An error as the run records it; anything not an AirlockError is internal and says so. */
async function recordFailure(run: LiveRun, err: unknown): Promise<ErrorInfo> {
  let failure = toErrorInfo(err);
  if (!(err instanceof AirlockError)) {
    failure = { kind: 'INTERNAL', message: `unexpected error: ${failure.message}` };
    // Stacks never reach records (they may hold paths); AIRLOCK_DEBUG shows them to the developer.
    if (process.env.AIRLOCK_DEBUG) process.stderr.write(`[airlock debug] run ${run.id}: ${(err as Error).stack ?? String(err)}\n`);
  }
  await run.audit.append('error', { kind: failure.kind, message: failure.message }).catch(debugLog.swallow('run.audit.error'));
  return failure;
}

/** Stops between steps once the user cancelled or the time limit passed. */
export function throwIfStopped(run: LiveRun): void {
  if (run.cancelRequested) throw new AirlockError('CANCELLED', 'The run was cancelled.');
  if (run.timedOut) throw new AirlockError('COMMAND_TIMEOUT', `The run reached its time limit (${run.input.limits.timeoutSec} s).`);
}

/** What an earlier step must have produced; a missing one is a bug in the step order. */
function required<T>(value: T | undefined, step: string, producer: string): T {
  if (value === undefined) throw new AirlockError('INTERNAL', `the ${step} step ran before ${producer}`);
  return value;
}
