import { rm } from 'node:fs/promises';
import { AirlockError, toErrorInfo, type ErrorInfo } from '../../contracts/errors';
import type { RunEnvironment } from '../../contracts/environments';
import { DEFAULT_GIT_HISTORY } from '../../contracts/runs';
import type { AgentCommandContext } from '../agents';
import { commandEnv } from '../common/command-env';
import { PreviewPorts } from '../network/preview-ports';
import { proxyEnvFor } from '../proxy/model-proxy';
import { DEFAULT_LIMITS, type SandboxSpec } from '../sandbox/driver';
import type { AgentEnd, AgentGrant, HydratedSandbox, HydratedWorkspace, LiveAgentRun, LiveRun, LiveSessionRun, PreparedSandbox, RunWorkspaceState, StepHost } from './run-context';
import { imageVariantOf } from './run-spec';
import { networkStep, policyStep } from './run-network';
import { resultPaths } from './run-apply';
import { checkStep, stopLeftoverProcesses } from './run-check';
import { restorePreparedHome, setupStep } from './run-setup';
import { toChangedFile, type StoredRun } from './run-record';
import { Checkpointer } from './checkpoints';
import { captureSession, restoreSession, saveSession } from './run-session';
import { sessionFile, type Continuation } from './run-thread';
import type { Sandbox } from '../sandbox/sandbox';
import type { RunResult } from '../channel/channel-client';
import type { ProjectSnapshot } from '../workspace/snapshot';
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
 * Each takes the products of the steps before it and returns its own; each kind's pipeline
 * (`agentPipeline`, `sessionPipeline`) hands them on, so the order is the compiler's to check. What a
 * step makes that must outlive a failure (the sandbox above all) it also records in `run.made`, which
 * only the wipe and the service read. `runSteps` orders them: an agent that fails still has its
 * result collected, and wipe always runs last.
 */

/** The sandbox's settings that follow from the environment and the project base. */
interface SandboxPlan {
  image: string;
  /** A project environment's image by id (the warm pool's key, §16), when the sandbox is made from it. */
  byId?: string;
  joined?: { name: string; extraHosts?: string[]; dns?: SandboxSpec['dns'] };
}

/** Reads the project, makes sure the image exists, creates the sandbox. */
export async function prepareStep(host: StepHost, run: LiveRun): Promise<PreparedSandbox> {
  const { input } = run;
  await host.transition(run, 'preparing', 'reading project');
  // The project is read while the environment, the image, the base's volumes and the sandbox are made
  // (none of them needs it): the scan of a large project is off the run's start (docs/architecture.md §11).
  const scanning = host.workspace.snapshot(input.projectDir, run.kind === 'session' ? run.spec.control.snapshot : undefined);
  scanning.catch(() => undefined); // marked handled only: awaited below, where its error fails the run
  await host.update(run, { phase: 'preparing image' });
  throwIfStopped(run);

  const onProgress = (p: { phase: string; message: string }) => {
    if (p.phase === 'build') host.updateLater(run, { phase: `building image: ${p.message}`.slice(0, 200) });
  };
  // The project's environment (docs/architecture.md §16): a derived image, or Airlock's own.
  const environment = host.deps.environment ? await host.deps.environment({ ...input, agentVariant: imageVariantOf(run.spec) }, onProgress) : undefined;
  if (environment) await recordEnvironment(host, run, environment.record);
  const image = environment?.image ?? (await host.deps.image(imageVariantOf(run.spec), onProgress, input.isolation));
  await host.update(run, { phase: 'starting sandbox' });
  const sidecars = environment?.sidecars;
  let joined: SandboxPlan['joined'];
  if (sidecars) {
    if (input.network === 'open') throw new AirlockError('INVALID_INPUT', "Compose services run on the run's internal network, which the open network policy would leave; use the none or allowlist policy for a compose devcontainer.", { field: 'network' });
    joined = await sidecars.createNetwork(run.id);
  }
  // A project environment's container sandbox is made from the image's id: the warm pool is keyed by
  // it, so a rebuilt image or a re-made prepared environment never gets an older sandbox (§16).
  const byId = environment?.imageId && input.isolation !== 'vm' ? environment.imageId : undefined;
  // (The environment step answers for Airlock's own image too: kind 'airlock', no image of its own.)
  const ownImage = !environment || (environment.record.kind === 'airlock' && !environment.image && !environment.setup && !environment.sidecars);
  const plan: SandboxPlan = { image, ...(byId ? { byId } : {}), ...(joined ? { joined } : {}) };
  let made: Awaited<ReturnType<typeof createSandbox>>;
  try {
    made = await createSandbox(host, run, plan, ownImage);
  } catch (err) {
    // No sandbox, so no wipe step to take the network with it.
    if (sidecars) await sidecars.remove(run.id).catch(() => undefined);
    throw err;
  }
  const { sandbox } = made;
  const snapshot = await scanning;
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
  await recordSandbox(host, run, sandbox, image);
  throwIfStopped(run);
  return {
    sandbox,
    snapshot,
    env: environment?.env ?? {},
    refreshBase: made.refreshBase,
    ...(environment?.setup ? { setup: environment.setup } : {}),
    ...(environment?.prepared ? { prepared: environment.prepared } : {}),
    ...(made.base ? { base: made.base } : {}),
  };
}

/** The environment that runs, on the record, in the audit log, as an event and in the terminal. */
async function recordEnvironment(host: StepHost, run: LiveRun, rec: RunEnvironment): Promise<void> {
  await host.update(run, { environment: rec });
  await run.audit.append('note', { message: environmentNote(rec) });
  // The CLI and the UI show it before setup starts: what runs, what is not applied, and a fallback's reason (§16).
  host.emitEvent(run, { type: 'environment', name: rec.name, kind: rec.kind, notApplied: rec.notApplied, ...(rec.fallback ? { fallback: rec.fallback } : {}) });
  for (const n of rec.notApplied) run.terminal.write(`\x1b[33m[airlock] not applied: ${n.field}: ${n.reason}\x1b[0m\r\n`);
}

/**
 * Creates the run's sandbox (recorded in `run.made` at once, for the wipe), from the project's base
 * when the run may start from one (§11): Airlock's own image in a container, a first turn.
 */
async function createSandbox(host: StepHost, run: LiveRun, plan: SandboxPlan, ownImage: boolean): Promise<{ sandbox: Sandbox; refreshBase: boolean; base?: PreparedSandbox['base'] }> {
  const { input } = run;
  const manager = await host.deps.sandboxes(input.isolation);
  const limits = host.deps.limits ?? DEFAULT_LIMITS;
  const network = input.network === 'open' ? 'open' : 'none';
  const { image, byId, joined } = plan;
  if (byId && !joined) run.made.warmNext = { image: byId, limits, network };
  const bases = host.deps.bases;
  const refreshBase = !!bases && ownImage && !joined && (input.isolation ?? 'container') === 'container' && run.kind === 'agent' && !run.spec.continuation;
  let base: PreparedSandbox['base'];
  if (bases && refreshBase) {
    const claim = await bases.claim(run.id, input.projectDir).catch((err: unknown) => ({ reason: (err as Error).message }));
    if ('record' in claim) base = { claim, remake: () => manager.create({ runId: run.id, image, limits, network }) };
    await run.audit.append('note', { message: 'record' in claim ? `the workspace starts from the project's base on the engine (${claim.record.volume}, written ${claim.record.createdAt}); only what differs is copied in` : `the project is copied in whole: ${claim.reason}` });
  }
  const sandbox = await manager.create({ runId: run.id, image: byId ?? image, limits, network, ...(base ? { volumesReady: true } : {}), ...(joined ? { joinNetwork: joined.name, ...(joined.extraHosts ? { extraHosts: joined.extraHosts } : {}), ...(joined.dns ? { dns: joined.dns } : {}) } : {}) });
  run.made.sandbox = sandbox;
  watchConnectionCap(host, run, sandbox);
  return { sandbox, refreshBase, ...(base ? { base } : {}) };
}

/** The sandbox on the run's record: its image and id, a VM's accelerator, a remote engine. */
async function recordSandbox(host: StepHost, run: LiveRun, sandbox: Sandbox, image: string): Promise<void> {
  watchPreviews(run, sandbox);
  const accel = vmAccelOf(sandbox.info);
  const engine = sandbox.info.engine;
  await host.update(run, (r) => ({ ...r, sandbox: { ...r.sandbox, image, id: sandbox.info.id, ...accel, ...(engine ? { engine: engine.description } : {}) } }));
  if (accel.accelNote) await run.audit.append('note', { message: `VM accelerator ${accel.accel}: ${accel.accelNote}` });
  // Where the project copy went is part of the record (docs/architecture.md §13).
  if (engine?.remote) await run.audit.append('note', { message: `sandbox on a remote engine: ${engine.description}; the project copy and the run token are there, provider keys stay on this machine` });
}

/** Published preview ports close with the run (or with the sandbox they were made for, if it is replaced). */
function watchPreviews(run: LiveRun, sandbox: Sandbox): void {
  run.made.previews?.dispose();
  const previews = run.disposables.add(new PreviewPorts(sandbox.channel));
  run.made.previews = previews;
  run.disposables.add(
    previews.onDidChange((e) => {
      if (e.type === 'published') run.terminal.write(`\r\n\x1b[36m[airlock] preview: sandbox port ${e.sandboxPort} → ${e.url}\x1b[0m\r\n`);
    }),
  );
}

/**
 * The project base failed its check at the copy (docs/architecture.md §11, "Trust"): the sandbox made
 * from it goes (nothing ran in it but the copy), the base is removed, and the run goes on in a sandbox
 * made afresh, with the project copied in whole. Said in the terminal and the audit log.
 */
async function fallBackFromBase(host: StepHost, run: LiveRun, old: Sandbox, base: NonNullable<PreparedSandbox['base']>, err: BaseMismatchError): Promise<Sandbox> {
  run.terminal.write(`\x1b[33m[airlock] the project's base on the engine failed its check; it is removed and the project is copied in whole\x1b[0m\r\n`);
  await run.audit.append('note', { message: `base_check_failed: ${err.message}` });
  delete run.made.sandbox;
  const proof = await old.destroy();
  if (proof.leftovers.length) await run.audit.append('note', { message: `the sandbox made from the base left: ${proof.leftovers.join(', ')}` });
  // Only now is no live run's overlay reading it, so it can go.
  await host.deps.bases?.discard(base.claim.record).catch(debugLog.swallow('run.base.discard'));
  const sandbox = await base.remake();
  run.made.sandbox = sandbox;
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

/**
 * Copies the project into the sandbox; the host keeps the same bytes as its own baseline. `baseline`
 * is what the copy is compared with: the project as read, or for a follow-up turn the project with
 * the previous result laid over it.
 */
export async function hydrateStep(host: StepHost, run: LiveRun, prepared: PreparedSandbox, baseline: ProjectSnapshot = prepared.snapshot): Promise<HydratedSandbox> {
  let { sandbox } = prepared;
  await host.update(run, { phase: 'copying project' });
  const gitHistory = run.input.gitHistory ?? DEFAULT_GIT_HISTORY;
  // A reused prepared environment's home goes into place while the project streams in (§16, "The prepared path").
  let preparedHome: Promise<RunResult> | undefined;
  if (prepared.setup && prepared.prepared?.reuse) {
    preparedHome = restorePreparedHome(sandbox);
    preparedHome.catch(debugLog.swallow('run.prepared-home'));
  }
  const objects = resultPaths(host.deps.store, run.id).objects;
  let hydrated: HydratedWorkspace;
  try {
    hydrated = await host.workspace.hydrate(sandbox, baseline, objects, { gitHistory, ...(prepared.base ? { base: prepared.base.claim } : {}) });
  } catch (err) {
    // A base changed on the engine is removed, never used again; this run goes on with a whole copy.
    if (!(err instanceof BaseMismatchError && prepared.base)) throw err;
    sandbox = await fallBackFromBase(host, run, sandbox, prepared.base, err);
    await rm(objects, { recursive: true, force: true });
    hydrated = await host.workspace.hydrate(sandbox, baseline, objects, { gitHistory });
  }
  // The project as it is now becomes the next run's base once this one is wiped (§11).
  if (prepared.refreshBase) run.made.refreshBase = { files: hydrated.files, bytes: hydrated.bytes };
  const workspace: HydratedSandbox = { sandbox, snapshot: baseline, hydrated, ...(preparedHome ? { preparedHome } : {}) };
  run.made.workspace = workspace;
  const repo = hydrated.sandboxRepo;
  if (repo) {
    const what = repo.kind === 'fresh' ? 'a fresh repository (one commit of the copied-in files)' : `${repo.commits} commit(s) of the project's history (git history ${gitHistory})${repo.rewritten ? ', with the files left out of the copy removed from every commit' : ''}`;
    await run.audit.append('note', { message: `The sandbox's git repository holds ${what}${repo.note ? `; ${repo.note}` : ''}. It is never read back: the result is the workspace's files against the host's baseline.` });
  }
  throwIfStopped(run);
  return workspace;
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
 * Starts the agent with provider settings that point at the proxy and the run token as its key, and
 * waits for it to end. A failure is handed on, not thrown: the pipeline still collects the result.
 */
export async function agentStep(host: StepHost, run: LiveAgentRun, ws: RunWorkspaceState, env: Record<string, string>, grant: AgentGrant, checkpoints: Checkpointer | undefined, resumed: Promise<boolean>): Promise<AgentEnd> {
  const { spec } = run;
  const input = spec.args;
  const end: AgentEnd = { commandEnv: {} };
  try {
    run.disposables.add(
      await host.workspace.watch(ws.sandbox, (paths) => {
        // Kept (bounded) as a hint for collect: the result itself is read and derived on the host.
        for (const p of paths) if (run.changeHints.size < MAX_CHANGE_HINTS) run.changeHints.add(p);
        checkpoints?.markChanged();
        // A hint, and its size is the sandbox's choice: the event carries a bounded sample.
        host.emitEvent(run, { type: 'file_changed', paths: paths.length > MAX_EVENT_PATHS ? paths.slice(0, MAX_EVENT_PATHS) : paths });
        host.filesChanged(run);
      }),
    );
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
      ...(grant.mcp ? { mcp: { url: `http://127.0.0.1:${grant.mcp.sandboxPort}/mcp`, token: grant.mcp.gateway.token } } : {}),
    };
    if (spec.agent.session) ctx.session = { id: spec.sessionId, resume: await resumed };
    const command = spec.agent.command(ctx);
    const agentEnv: Record<string, string> = { ...env, ...proxyEnvFor(grant.sandboxPort, grant.token), ...(grant.network?.env ?? {}), ...command.env };
    for (const name of command.unsetEnv ?? []) delete agentEnv[name];
    end.commandEnv = run.commandEnv = commandEnv(agentEnv);
    await host.runAgent(run, ws.sandbox, command.argv, agentEnv, command.cwd);
  } catch (err) {
    end.failure = err;
  }
  return end;
}

/**
 * An MCP session's middle (docs/architecture.md §17): the sandbox is live for the client's commands
 * until the session ends. No run token was minted: nothing in the sandbox can reach a model.
 */
export async function sessionStep(host: StepHost, run: LiveSessionRun, sandbox: Sandbox): Promise<void> {
  const session = run.spec.control;
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

/** What collect hands on: the result as stored with the run. */
export interface CollectedRun {
  /** How many files changed. */
  changed: number;
}

/**
 * Derives the result on the host and stores it with the run: patch, changed files, baseline. A
 * follow-up turn's thread total is stored beside it (`previous`); the result is the checkpointer's last.
 */
export async function collectStep(host: StepHost, run: LiveRun, ws: RunWorkspaceState, opts: { checkpoints?: Checkpointer; previous?: Continuation['previous'] } = {}): Promise<CollectedRun> {
  const { sandbox, snapshot, hydrated } = ws;
  const { checkpoints, previous } = opts;
  await host.transition(run, 'collecting', 'collecting the result');
  await checkpoints?.settle();
  const { result, patch } = await host.workspace.collect(sandbox, { snapshot, hydrated, hints: run.changeHints });
  // The result is the run's last checkpoint (recorded before the store is compacted, which keeps their blobs).
  await checkpoints?.finish({ result, patch }).catch((err: unknown) => run.audit.append('note', { message: `checkpoints not kept: ${toErrorInfo(err).message}` }));
  const thread = previous ? await collectThreadResult(hydrated.repo, result, previous) : undefined;
  await host.workspace.store(host.deps.store, run.id, { result, patch }, thread);
  if (result.changes.length) {
    await run.audit.append('file_change', { changes: result.changes.map((c) => ({ path: c.path, kind: c.status, ...(c.oldPath ? { oldPath: c.oldPath } : {}) })) });
  }
  await host.update(run, {
    changedFiles: result.changes.map((c) => toChangedFile(c)),
    patchPath: host.deps.store.paths(run.id).patch,
    baseline: { commit: result.baseCommit, ...(result.headCommit ? { headCommit: result.headCommit } : {}) },
  });
  return { changed: result.changes.length };
}

/**
 * The run's checkpointer (docs/architecture.md §19): the same collect as the result's, per turn.
 * The built-in agent's transcript is kept with each checkpoint, for Continue from here.
 */
function startCheckpoints(host: StepHost, run: LiveAgentRun, ws: RunWorkspaceState, tokenBytes: Buffer): Checkpointer | undefined {
  const { spec } = run;
  const { sandbox, snapshot, hydrated } = ws;
  if (!hydrated.hostBaseline) return undefined;
  const baseCommit = hydrated.hostBaseline;
  baseCommit.catch(() => undefined); // marked handled only: the checkpointer awaits it, where its error is the look's
  return new Checkpointer({
    store: host.deps.store,
    runId: run.id,
    shell: sandbox.channel,
    collect: ({ ref, maxResultBytes }) => host.workspace.collect(sandbox, { snapshot, hydrated, hints: run.changeHints, ref, maxResultBytes }),
    baseCommit,
    tracksDeps: hydrated.manifest.some((f) => /(^|\/)node_modules\//.test(f.path)),
    audit: run.audit,
    ...(spec.agent.session && spec.args.agent === 'builtin' ? { session: { spec: spec.agent.session, id: spec.sessionId, token: tokenBytes } } : {}),
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
async function restoreAgentSession(run: LiveAgentRun, sandbox: Sandbox): Promise<boolean> {
  const { spec } = run;
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
async function keepAgentSession(host: StepHost, run: LiveAgentRun, sandbox: Sandbox, tokenBytes: Buffer | undefined): Promise<void> {
  const { spec } = run;
  if (!spec.agent.session) return;
  try {
    const session = await captureSession(sandbox.channel, spec.agent.session, spec.sessionId, tokenBytes);
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
  // What the steps made, however far they got: the wipe reads only this.
  const { made } = run;
  let wipe: StoredRun['wipe'];
  try {
    if (made.sandbox) {
      const proof = await made.sandbox.destroy();
      // A warm-pool sandbox keeps the names it was started under: say which pool id they carry, so the proof
      // can relate them to this run (the run id is what the user saw).
      const pooled = proof.labelRunId ? { pooledAs: proof.labelRunId } : {};
      wipe = { verified: proof.leftovers.length === 0, removed: proof.removed, leftovers: proof.leftovers, ...pooled, durationMs: proof.durationMs, at: proof.verifiedAt };
      await run.audit.append('wipe', { removed: wipe.removed, leftovers: wipe.leftovers, ...pooled, durationMs: proof.durationMs, verifiedAt: wipe.at, verified: wipe.verified });
      // Verified gone: the next run on this environment's image finds a started sandbox (the app's pool, §16),
      // of the prepared image once it is committed (run-setup.ts).
      await made.preparedKept;
      if (!proof.leftovers.length && made.warmNext) host.deps.warmEnvironment?.(run.input.isolation, made.warmNext);
      // The project as it is now becomes the next run's base, off this run's path and the next one's (§11).
      if (made.refreshBase) void host.deps.bases?.refresh(run.input.projectDir, made.refreshBase);
      if (proof.leftovers.length) failure ??= { kind: 'SANDBOX_FAILED', message: `The sandbox could not be fully removed: ${proof.leftovers.join(', ')} remain. 'airlock doctor' reaps leftovers.` };
    }
  } catch (err) {
    const info = toErrorInfo(err);
    if (info.kind === 'DOCKER_UNREACHABLE') {
      // The engine is out of reach (a remote link dropped): nothing could be removed or checked there.
      // What was collected is already stored on the host; the sandbox is wiped once the engine answers.
      const message = `${info.message} The remote wipe could not be verified; Airlock removes the sandbox (label airlock.run=${made.sandbox?.info.runId ?? run.id}) and checks it is gone before the next run on that engine or at the next start.`;
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
    await made.preparedKept;
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
    if (run.kind === 'agent') await agentPipeline(host, run);
    else await sessionPipeline(host, run);
  } catch (err) {
    failure = await recordFailure(run, err);
  } finally {
    run.disposables.dispose();
  }
  return wipeStep(host, run, failure);
}

/** An agent run: prepare, hydrate, setup, network (run token, egress, MCP gateway), agent, check, collect. */
async function agentPipeline(host: StepHost, run: LiveAgentRun): Promise<void> {
  const { spec } = run;
  const prepared = await prepareStep(host, run);
  // A follow-up's conversation goes into place while the project streams in (off the agent's critical path).
  const resumed = spec.agent.session ? restoreAgentSession(run, prepared.sandbox) : Promise.resolve(false);
  // A follow-up turn starts from the previous result: laid over the project, it is this run's baseline.
  const baseline = spec.continuation ? overlaySnapshot(prepared.snapshot, await overlayOf(spec.continuation.previous)) : prepared.snapshot;
  const hydrated = await hydrateStep(host, run, prepared, baseline);
  // Lifecycle commands, before the run token exists (docs/architecture.md §16).
  const ws = await setupStep(host, run, prepared, hydrated);
  // The proxy holds a model call until the turn before it is checkpointed (§19); the checkpointer needs the token it mints.
  let checkpoints: Checkpointer | undefined;
  const grant = await networkStep(host, run, ws.sandbox, () => checkpoints?.turnEnded() ?? Promise.resolve());
  checkpoints = startCheckpoints(host, run, ws, grant.tokenBytes);
  const end = await agentStep(host, run, ws, prepared.env, grant, checkpoints, resumed);
  // With a check (§18), nothing the agent started outlives it: not into collect, not into the check.
  const check = spec.args.check;
  const swept = check ? await stopLeftoverProcesses(ws.sandbox) : 0;
  const { changed } = await collectStep(host, run, ws, { ...(checkpoints ? { checkpoints } : {}), ...(spec.continuation ? { previous: spec.continuation.previous } : {}) });
  await keepAgentSession(host, run, ws.sandbox, grant.tokenBytes);
  if (check) await checkStep(host, run, check, swept, { sandbox: ws.sandbox, env: end.commandEnv, tokenBytes: grant.tokenBytes });
  if (end.failure) throw withChangesNote(end.failure, changed);
}

/** An MCP session (§17): prepare, hydrate, setup, the network policy (no run token), the client's use, collect. */
async function sessionPipeline(host: StepHost, run: LiveSessionRun): Promise<void> {
  const prepared = await prepareStep(host, run);
  const hydrated = await hydrateStep(host, run, prepared);
  const ws = await setupStep(host, run, prepared, hydrated);
  const net = await policyStep(host, run, ws.sandbox);
  // The client's commands get the project environment's variables (containerEnv, the image's ENV) and reach
  // the egress proxy, as an agent's do.
  run.commandEnv = commandEnv({ ...prepared.env, ...(net?.env ?? {}) });
  const sessionFailure = await sessionStep(host, run, ws.sandbox).then(
    () => undefined,
    (err: unknown) => err,
  );
  const { changed } = await collectStep(host, run, ws);
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
    // Stacks never reach records (they may hold paths); `--debug` (AIRLOCK_DEBUG=1) shows them to the developer.
    debugLog.stack(`run ${run.id}`, err);
  }
  await run.audit.append('error', { kind: failure.kind, message: failure.message }).catch(debugLog.swallow('run.audit.error'));
  return failure;
}

/** Stops between steps once the user cancelled or the time limit passed. */
export function throwIfStopped(run: LiveRun): void {
  if (run.cancelRequested) throw new AirlockError('CANCELLED', 'The run was cancelled.');
  if (run.timedOut) throw new AirlockError('COMMAND_TIMEOUT', `The run reached its time limit (${run.input.limits.timeoutSec} s).`);
}
