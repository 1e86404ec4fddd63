import { baseInfo } from './sandbox/docker/project-base-volumes';
import { randomBytes } from 'node:crypto';
import { mkdir, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { RunEvent } from '../contracts';
import { AirlockError } from '../contracts/errors';
import { debugLog } from './common/debug-log';
import { newRunDefaults } from '../contracts/run-defaults';
import { ApplyInput, IMAGE_CAP_BYTES } from '../contracts/diffs';
import type { ProviderInfo } from '../contracts/keys';
import type { SecretView } from '../contracts/secrets';
import type { Settings } from '../contracts/settings';
import type { AirlockServices, AttemptsService, AuditService, EnvironmentsService, McpService, DiffsService, KeysService, ProjectsService, ProvidersService, RunsService, SandboxesService, SettingsService, TerminalsService } from './api/services';
import { createAirlockCore, type AirlockCore, type AirlockCoreOptions } from './app';
import { readRunLogs, verifyRunLogs, type RunLogs } from './audit/audit-reader';
import { APP_VERSION } from './common/app-version';
import { Emitter, type Event } from './common/disposable';
import { toTerminalChunk, type TerminalOutput } from './common/terminal-output';
import { getAgentAdapter } from './agents';
import { checkRunEnvironment } from './environment/run-environment';
import { listPrepared, parseAge, PreparedUsage, prunePrepared } from './environment/prepared-environments';
import { formatPlan, planEnvironment } from './environment/environment-plan';
import { projectEnvironments } from './environment/project-environments';
import { defaultDoctorChecks, engineCheck, failedFinding, runDoctorChecks, type DoctorContext, type DoctorFinding, type EngineFound } from './doctor/doctor';
import { describeEngine, validateEngineSelection } from './sandbox/docker/engine-endpoint';
import type { ProviderConfig } from './keys/provider-catalog';
import { readCodexSignin } from './keys/codex-auth-file';
import { commandText } from './network/gateway/host-command-secret';
import { formFromText, formText, presetBinding, SecretStore, type InjectForm, type SecretSummary } from './network/gateway/secret-store';
import { credentialAgent } from './keys/subscription-credentials';
import { imagesOf } from './workspace/result-images';
import { listCheckpoints } from './runs/checkpoints';
import { applyRunResult, loadLegacyResult, mergeViewOfRun, patchOfSelection, resolveRunConflict, writeRecordedPatch } from './runs/run-apply';
import { AttemptGroups } from './runs/attempt-group';
import { AttemptGroupStore } from './runs/attempt-group-store';
import { comparisonMarkdown } from './runs/attempt-report';
import { defaultAttemptConcurrency } from './runs/attempt-slots';
import { RunChanges } from './runs/run-changes';
import { asRead } from './runs/run-owner';
import { toRunRecordView, toRunSummary, type StoredRun } from './runs/run-record';
import { ShellSessions } from './runs/shell-sessions';
import { replayTerminal } from './runs/terminal-replay';

import { listFolders, withRecentProject } from './workspace/folder-listing';
import { snapshotProject } from './workspace/snapshot';
import { ApplyApprovals } from './mcp/apply-approvals';
import { announceApp, ClientGrants } from './runs/client-grants';
import { startMcpHttpServer, type McpHttpServer } from './mcp/mcp-http';
import { mcpSetupLines } from './mcp/mcp-setup';
import { resolveAirlockCommand } from './mcp/airlock-command';
import { checkStdioSetup } from './mcp/setup-check';
import { resourcePaths } from './common/resources';
import { sha256Hex } from './common/sha256';

function mapEvent<A, B>(event: Event<A>, fn: (a: A) => B): Event<B> {
  return (listener) => event((a) => listener(fn(a)));
}

/**
 * The contracts implemented by the real core (docs/architecture.md §5). Both transports — Electron IPC and
 * the loopback WebSocket host — reach the core only through these services and the router.
 */
export async function createAirlockServices(opts: AirlockCoreOptions & { warm?: boolean; pickFolder?: FolderPicker; openExternal?: (url: string) => Promise<void> }): Promise<AirlockServices> {
  const core = await createAirlockCore(opts);
  // The app lives long enough for a pre-started sandbox to pay off; the CLI does not warm.
  if (opts.warm !== false) void core.warm();
  return servicesFor(core, opts.pickFolder, { asksForMcp: true, ...(opts.openExternal ? { openExternal: opts.openExternal } : {}) });
}

/** The system's folder dialog (Electron's main process); resolves to the chosen folder or null. */
export type FolderPicker = (defaultPath: string | undefined) => Promise<string | null>;

/** What the domain services below share. */
interface ServiceParts {
  core: AirlockCore;
  store: AirlockCore['store'];
  runs: AirlockCore['runs'];
  vault: AirlockCore['vault'];
  catalog: AirlockCore['catalog'];
  changes: RunChanges;
  shells: ShellSessions;
  /** Every terminal's output as bytes; `terminals:onDidData` is the same decoded, for text transports. */
  terminalOutput: Emitter<TerminalOutput>;
  /** A run's two logs and the anchors its record keeps of them. */
  logsOf(run: StoredRun): RunLogs;
  /** Opens a checked https (or loopback) page in the user's browser (the desktop app's main process); absent: cannot. */
  openExternal?: (url: string) => Promise<void>;
  providerInfo(p: ProviderConfig): Promise<ProviderInfo>;
}

/**
 * The services over a core. Only a process that shows the user its questions (the desktop app,
 * `airlock serve`: `asksForMcp: true`) announces itself as the app that answers MCP folder requests
 * (§17); the CLI's commands (`airlock run`, `compare`, `mcp`, …) do not, so a client's request is never
 * left waiting on a process that cannot ask anyone.
 */
export function servicesFor(core: AirlockCore, pickFolder?: FolderPicker, opts: { asksForMcp?: boolean; openExternal?: (url: string) => Promise<void> } = {}): AirlockServices {
  const { store, runs, vault, catalog } = core;
  const terminalOutput = new Emitter<TerminalOutput>();
  const forwardRunTerminals = runs.onDidTerminalData((c) => terminalOutput.fire(c));
  const parts: ServiceParts = {
    core,
    store,
    runs,
    vault,
    catalog,
    terminalOutput,
    changes: new RunChanges(runs, store),
    shells: new ShellSessions(runs, store, (c) => terminalOutput.fire(c)),
    ...(opts.openExternal ? { openExternal: opts.openExternal } : {}),
    logsOf: (run) => ({ ...store.paths(run.id), anchors: { ...(run.audit ? { audit: run.audit } : {}), ...(run.applyLog ? { applyLog: run.applyLog } : {}) } }),
    async providerInfo(p) {
      const key = await vault.info(p.id);
      return { id: p.id, label: p.label, kind: p.kind, baseUrl: p.baseUrl, requiresKey: p.requiresKey, builtin: p.builtin, models: p.models, hasKey: key.hasKey, ...(p.credential ? { credential: { kind: p.credential, agent: credentialAgent(p.credential) } } : {}) };
    },
  };

  const mcp = mcpService(parts, () => services, opts.asksForMcp === true);
  const attempts = attemptsService(parts, () => services);
  const services: AirlockServices = {
    attempts: attempts.service,
    sandboxes: sandboxesService(parts),
    keys: keysService(parts),
    providers: providersService(parts),
    runs: runsService(parts),
    diffs: diffsService(parts),
    terminals: terminalsService(parts),
    settings: settingsService(parts),
    audit: auditService(parts),
    projects: projectsService(pickFolder),
    mcp: mcp.service,
    environments: environmentsService(parts),
    secrets: secretsService(parts),
    mcpServers: mcpServersService(parts),
    onDidTerminalOutput: terminalOutput.event,
    previewPorts() {
      return runs.allPreviewPorts();
    },
    async activeRunIds() {
      return runs.activeRunIds();
    },
    async dispose() {
      forwardRunTerminals.dispose();
      parts.shells.dispose();
      attempts.dispose();
      await mcp.dispose();
      await core.dispose();
    },
  };
  return services;
}

/** Project environments: the form's picker, and prepared environments (`airlock env list|prune`, Settings; §16). */
function environmentsService(parts: ServiceParts): EnvironmentsService {
  const { core } = parts;
  const usage = new PreparedUsage(core.home);
  return {
    async find({ projectDir, environment }) {
      const choice = environment ?? (await core.settings.get()).defaultEnvironment;
      return projectEnvironments(core, projectDir, choice);
    },
    async plan({ projectDir, environment }) {
      const choice = environment ?? (await core.settings.get()).defaultEnvironment;
      return { text: formatPlan(await planEnvironment(core, projectDir, choice), undefined, 'app') };
    },
    async list() {
      const environments = await listPrepared((await core.engine()).docker, usage, await core.app.installationId());
      // Project bases are listed with them (§11); an engine without them has none.
      const bases = (await core.bases.list().catch(() => [])).map(baseInfo);
      return { environments, totalBytes: environments.reduce((n, e) => n + e.sizeBytes, 0), bases };
    },
    async prune({ olderThan }) {
      const olderThanMs = olderThan ? parseAge(olderThan) : undefined;
      const release = (ids: string[]) => core.releaseImages(ids);
      const result = await prunePrepared((await core.engine()).docker, usage, await core.app.installationId(), olderThanMs === undefined ? { release } : { olderThanMs, release });
      // Project bases go with them: every one without an age, else those whose project folder is gone (§11).
      const bases = await core.bases.prune({ all: olderThanMs === undefined });
      return {
        removed: [...result.removed, ...bases.removed.map((p) => ({ key: `project base: ${p}`, sizeBytes: 0 }))],
        kept: [...result.kept, ...bases.kept.filter(() => olderThanMs === undefined).map((p) => ({ key: `project base: ${p}`, reason: 'a live run starts from it' }))],
        freedBytes: result.freedBytes + bases.freedBytes,
      };
    },
  };
}

/**
 * The user's MCP servers (docs/architecture.md §20): the same registry and tool listing as `airlock
 * mcp-servers …`, loaded when first used (the MCP SDK is not needed to start the app).
 */
function mcpServersService(parts: ServiceParts): AirlockServices['mcpServers'] {
  const load = async () => {
    const admin = await import('./network/mcp-gateway/mcp-servers-admin');
    return { admin, registry: admin.mcpServerRegistryFor({ home: parts.core.home, keychainService: parts.core.app.keychainService }) };
  };
  return {
    async list({ projectDir }) {
      const { admin, registry } = await load();
      const env = parts.core.app.env;
      const userHome = env.HOME || env.USERPROFILE;
      return admin.listMcpServers(registry, projectDir, userHome ? { userHome, env: { CODEX_HOME: env.CODEX_HOME, APPDATA: env.APPDATA } } : undefined);
    },
    async add({ name, url, transport, auth, credential }) {
      const { admin, registry } = await load();
      return admin.addMcpServer(registry, { name, url, transport, auth }, auth.type === 'none' ? undefined : credential);
    },
    async remove({ name }) {
      const { registry } = await load();
      return { removed: await registry.remove(name) };
    },
    async tools({ name }) {
      const { admin, registry } = await load();
      const { entry, tools, cut } = await admin.currentTools(registry, name);
      return { tools: admin.mcpToolViews(entry, tools), cut };
    },
    async setRule({ name, tool, rule }) {
      const { admin, registry } = await load();
      await registry.setPolicy(name, tool, rule === 'default' ? undefined : rule);
      return admin.mcpServerViewOf(registry, name);
    },
    async pin({ name }) {
      const { admin, registry } = await load();
      const { entry, tools, cut } = await admin.pinServerTools(registry, name);
      return { server: await admin.mcpServerViewOf(registry, name), tools: admin.mcpToolViews(entry, tools), cut };
    },
    async login({ name }) {
      const { admin, registry } = await load();
      const open = parts.openExternal;
      if (!open) throw new AirlockError('INVALID_INPUT', `this window cannot open a browser; sign in with \`airlock mcp-servers login ${name}\``, { field: 'name' });
      return { server: await admin.loginMcpServer(registry, name, open) };
    },
    async projectServers({ projectDir }) {
      const { admin, registry } = await load();
      return admin.projectMcpServers(registry, parts.core.home, projectDir);
    },
    async setProjectServers({ projectDir, servers }) {
      const { admin, registry } = await load();
      return admin.setProjectMcpServers(registry, parts.core.home, projectDir, servers);
    },
  };
}

/** Egress secrets (docs/architecture.md §2.8): bindings on disk, values in the keychain; never a value back. */
function secretsService(parts: ServiceParts): AirlockServices['secrets'] {
  const store = new SecretStore({ home: parts.core.home, service: parts.core.app.keychainService });
  const view = (s: SecretSummary): SecretView => ({
    name: s.name,
    hosts: s.hosts,
    ...(s.pathPrefixes ? { pathPrefixes: s.pathPrefixes } : {}),
    forms: s.forms.map(formText),
    env: s.env,
    git: s.git,
    npm: s.npm,
    ...(s.preset ? { preset: s.preset } : {}),
    ...(s.command ? { command: commandText(s.command.argv), ...(s.command.ttlSeconds ? { ttlSeconds: s.command.ttlSeconds } : {}) } : {}),
    hasValue: s.hasValue,
  });
  return {
    async list() {
      return (await store.list()).map(view);
    },
    async set({ name, preset, hosts, forms, value }) {
      const binding = preset
        ? presetBinding(preset, name, hosts[0])
        : { name, hosts, forms: forms.map((f) => formFromText(f) as InjectForm), env: [] };
      await store.set(binding, value);
      const stored = (await store.list()).find((s) => s.name === name);
      if (!stored) throw new AirlockError('INTERNAL', `the secret "${name}" was not found after it was stored`);
      return view(stored);
    },
    async remove({ name }) {
      return { removed: await store.remove(name) };
    },
  };
}

/** Readiness (the same checks as `airlock doctor`) and the sandbox image. */
function sandboxesService(parts: ServiceParts): SandboxesService {
  const { core } = parts;
  return {
    // The same checks as `airlock doctor`; the image is not built here (the UI offers it as a fix).
    doctor: () => runDoctorChecks(defaultDoctorChecks(), { app: core.app, env: core.env, options: { build: false, agents: false }, progress: () => undefined, progressDone: () => undefined }),
    async buildImage({ variant }) {
      const buildId = `b-${randomBytes(4).toString('hex')}`;
      const started = performance.now();
      const image = await core.image(variant);
      return { buildId, image, durationMs: Math.round(performance.now() - started) };
    },
    debugLog: () => Promise.resolve({ notes: debugLog.recent() }),
    onDidBuildProgress: mapEvent(core.onDidBuildProgress, (p) => ({ buildId: p.variant, phase: p.phase, message: p.message, ...(p.fraction !== undefined ? { fraction: p.fraction } : {}) })),
  };
}

/** Provider keys in the OS keychain; the renderer only ever sees `KeyInfo`. */
function keysService(parts: ServiceParts): KeysService {
  const { vault, catalog } = parts;
  return {
    list: () => vault.list(),
    async set({ provider, key, baseUrl, storage }) {
      await catalog.get(provider); // PROVIDER_UNKNOWN before anything is stored
      return vault.set(provider, key, { storage, ...(baseUrl ? { baseUrl } : {}) });
    },
    setBaseUrl: ({ provider, baseUrl }) => vault.setBaseUrl(provider, baseUrl),
    async setSubscription({ kind, secret, storage }) {
      return kind === 'claude-subscription' ? vault.setClaudeSubscription(secret, { storage }) : vault.importChatgptSignin(secret, { storage });
    },
    async importCodex({ storage }) {
      return vault.importChatgptSignin((await readCodexSignin(parts.core.env)).text, { storage });
    },
    async remove({ provider }) {
      return { removed: await vault.remove(provider) };
    },
    test: ({ provider }) => vault.test(provider),
    status: () => vault.status(),
    onDidChange: vault.onDidChange,
  };
}

/** Model providers and whether each has a key. */
function providersService(parts: ServiceParts): ProvidersService {
  const { vault, catalog, providerInfo } = parts;
  return {
    async list() {
      return Promise.all((await catalog.list()).map(providerInfo));
    },
    async add({ id, label, kind, baseUrl, requiresKey, key, models }) {
      const config = await catalog.add({ id, baseUrl, kind, requiresKey, models, ...(label ? { label } : {}) });
      if (key) await vault.set(id, key, {});
      return providerInfo(config);
    },
    async remove({ id }) {
      await vault.remove(id).catch(debugLog.swallow('keys.remove.keychain'));
      return { removed: await catalog.remove(id) };
    },
  };
}

/** Runs: start, list, inspect, cancel, approve, replay events, shells, ports, network. */
/** A missing folder or a file given as the project: the form marks its folder field and offers the fix. */
function aboutProjectDir(err: unknown): unknown {
  if (err instanceof AirlockError && (err.kind === 'NOT_FOUND' || err.kind === 'INVALID_INPUT') && !err.field) {
    return new AirlockError(err.kind, err.message, { field: 'projectDir' });
  }
  return err;
}

function runsService(parts: ServiceParts): RunsService {
  const { store, runs, shells } = parts;
  return {
    async start(input) {
      // Checked before a run record exists: a folder that is not there is the form's error, not a failed run.
      const dir = path.resolve(input.projectDir);
      const st = await stat(dir).catch(() => undefined); // the folder may not exist
      if (!st) throw new AirlockError('NOT_FOUND', `Project folder ${dir} does not exist; choose an existing folder.`, { field: 'projectDir' });
      if (!st.isDirectory()) throw new AirlockError('INVALID_INPUT', `${dir} is not a folder; choose the project's folder.`, { field: 'projectDir' });
      const settings = await parts.core.settings.get();
      const gitHistory = input.gitHistory ?? newRunDefaults(settings).gitHistory;
      const environment = input.environment ?? settings.defaultEnvironment;
      // A malformed or unaccepted devcontainer is the form's error, before a run exists (§16).
      await checkRunEnvironment(parts.core, { ...input, projectDir: dir, agentVariant: getAgentAdapter(input.agent).imageVariant, ...(environment ? { environment } : {}) });
      const started = toRunSummary(await runs.start({ ...input, ...(gitHistory === undefined ? {} : { gitHistory }), ...(environment ? { environment } : {}) }));
      // The New run form offers the latest folders again (settings, so the CLI's runs count too).
      const { recentProjects } = await parts.core.settings.get();
      if (recentProjects?.[0] !== started.projectDir) await parts.core.settings.update({ recentProjects: withRecentProject(recentProjects, started.projectDir) }).catch(debugLog.swallow('settings.recentProjects'));
      return started;
    },
    async continue(args) {
      return toRunSummary(await runs.continue(args));
    },
    async previewExcluded({ projectDir }) {
      const snap = await snapshotProject(parts.core.app.git, projectDir).catch((err: unknown) => {
        throw aboutProjectDir(err);
      });
      return {
        projectDir: snap.projectDir,
        excluded: snap.excluded.map((e) => ({ path: e.path, reason: e.reason })),
        includedFiles: snap.fileCount,
        includedBytes: snap.totalBytes,
        isGitRepo: snap.isGit,
      };
    },
    // What readers see: a run whose process is gone reads as interrupted (core/runs/run-owner.ts).
    async list({ limit, status }) {
      const all = (await store.list()).runs.map(asRead);
      return all
        .filter((r) => !status || status.includes(r.status))
        .slice(0, limit ?? all.length)
        .map(toRunSummary);
    },
    async get({ runId }) {
      return toRunRecordView(asRead(await store.get(runId)));
    },
    async cancel({ runId }) {
      return toRunSummary(await runs.cancel(runId));
    },
    async delete({ runId }) {
      if (runs.activeRunIds().includes(runId)) throw new AirlockError('CONFLICT', 'The run is still in progress; stop it first.');
      await store.get(runId);
      await store.delete(runId);
      return { deleted: true };
    },
    async approve({ runId, requestId, approved }) {
      return { accepted: await runs.approve(runId, requestId, approved) };
    },
    async events({ runId, afterSeq, limit }) {
      await store.get(runId);
      const events: RunEvent[] = [];
      let more = false;
      for await (const e of store.readEvents(runId, { schema: RunEvent })) {
        if (e.seq <= afterSeq) continue;
        if (events.length >= limit) {
          more = true;
          break;
        }
        events.push(e);
      }
      const done = !more && !runs.activeRunIds().includes(runId);
      return { events, nextSeq: events.at(-1)?.seq ?? afterSeq, done };
    },
    async openShell({ runId, cols, rows }) {
      return shells.open(runId, cols, rows);
    },
    publishPort({ runId, port }) {
      return runs.publishPort(runId, port);
    },
    async previewPorts({ runId }) {
      return runs.previewPorts(runId);
    },
    async answerNetwork({ runId, id, answer }) {
      return { answered: await runs.answerNetwork(runId, id, answer) };
    },
    async answerMcp({ runId, id, answer }) {
      return { answered: runs.answerMcp(runId, id, answer) };
    },
    async allowNetwork({ runId, host, port, scope }) {
      await runs.allowNetwork(runId, host, port, scope);
      return { allowed: true };
    },
    onDidChangeStatus: mapEvent(runs.onDidChangeStatus, toRunSummary),
    onDidEvent: runs.onDidEvent,
  };
}

/**
 * Attempt groups (docs/architecture.md §18): start, compare, export, apply one. Apply goes through
 * `diffs:apply` (the review/apply flow: exactly the reviewed bytes).
 */
function attemptsService(parts: ServiceParts, services: () => AirlockServices): { service: AttemptsService; dispose(): void } {
  const { core, store, runs, changes } = parts;
  const groups = new AttemptGroups({
    runs,
    getRun: (runId) => store.get(runId),
    groups: new AttemptGroupStore(path.dirname(store.root)),
    concurrency: async () => (await core.settings.get()).attemptsConcurrency ?? defaultAttemptConcurrency(),
    changedFiles: async (runId) => (await changes.list(runId)).files,
    apply: (input) => services().diffs.apply(input),
    async wipeAgain(run) {
      const manager = await core.sandboxes(run.isolation);
      return manager.driver.destroy(run.id);
    },
  });
  return {
    dispose: () => groups.dispose(),
    service: {
      start: (input) => groups.start(input),
      list: ({ limit }) => groups.list(limit),
      compare: ({ groupId }) => groups.compare(groupId),
      async export({ groupId, format }) {
        const c = await groups.compare(groupId);
        return format === 'json'
          ? { filename: `airlock-${groupId}.json`, mimeType: 'application/json', text: `${JSON.stringify(c, null, 2)}\n` }
          : { filename: `airlock-${groupId}.md`, mimeType: 'text/markdown', text: comparisonMarkdown(c) };
      },
      // Parsed here too: a caller in the same process (the CLI, tests) gets the contract's defaults.
      apply: ({ groupId, apply }) => groups.apply(groupId, ApplyInput.parse(apply)),
      onDidChange: groups.onDidChange,
    },
  };
}

/** Past this a patch is not sent as text (the UI shows its size and offers to save it). */
const PATCH_TEXT_BYTES = 4 * 1024 * 1024;

/** A run's changes: list, per-file diffs, selection preview, apply, patch export, merge and resolve. */
function diffsService(parts: ServiceParts): DiffsService {
  const { store, runs, changes } = parts;
  const ended = (runId: string, what: string) => {
    if (runs.activeRunIds().includes(runId)) throw new AirlockError('CONFLICT', `The run is still in progress; ${what} once it has ended.`);
  };
  return {
    list: ({ runId, scope, checkpoint }) => changes.list(runId, scope, checkpoint),
    // `context` lines: diffs come as git made them (3 lines) until fileDiff takes a context.
    file: ({ runId, scope, checkpoint, path: file }) => changes.file(runId, file, scope, checkpoint),
    checkpoints: ({ runId }) => listCheckpoints(store, runId),
    async images({ runId, scope, checkpoint, path: file }) {
      // Pictures come from the collected result only: what the live sandbox holds is its own word.
      ended(runId, 'see its pictures');
      const stored = await changes.storedResult(runId, scope, checkpoint);
      return imagesOf(stored.repo, stored.result, file, IMAGE_CAP_BYTES);
    },
    async preview({ runId, scope, checkpoint, files, selection }) {
      const sel = await patchOfSelection(await changes.storedResult(runId, scope, checkpoint), { ...(files ? { files } : {}), ...(selection ? { selection } : {}) });
      return { bytes: sel.patch.length, sha256: sel.sha256, files: sel.changes.map((c) => c.path), ...(sel.patch.length <= PATCH_TEXT_BYTES ? { text: sel.patch.toString('utf8') } : {}) };
    },
    async apply({ runId, scope, checkpoint, files, selection, mode, branch, message, targetDir, reviewedSha256, skipConflicts }) {
      ended(runId, 'apply its result');
      const run = await store.get(runId);
      return applyRunResult({ store, run, reviewedSha256, ...(scope ? { scope } : {}), ...(checkpoint !== undefined ? { checkpoint } : {}), ...(files ? { files } : {}), ...(selection ? { selection } : {}), mode, ...(branch ? { branch } : {}), ...(message ? { message } : {}), ...(targetDir ? { targetDir } : {}), ...(skipConflicts ? { skipConflicts } : {}) });
    },
    async exportPatch({ runId, scope, checkpoint, files, selection, destPath, to }) {
      const sel = { ...(scope ? { scope } : {}), ...(checkpoint !== undefined ? { checkpoint } : {}), ...(files ? { files } : {}), ...(selection ? { selection } : {}) };
      let patch: Buffer;
      let dest: string;
      if (destPath || to) {
        // A patch written where the user asked, or handed over, is on its way to a project: it goes in the apply log.
        dest = destPath ? path.resolve(destPath) : (to as string);
        ({ patch } = await writeRecordedPatch({ store, runId, dest, ...sel, write: Boolean(destPath) }));
      } else {
        const legacy = files || selection?.length || scope === 'thread' || checkpoint !== undefined ? undefined : await loadLegacyResult(store, runId);
        patch = legacy ? legacy.patch : (await patchOfSelection(await changes.storedResult(runId, scope, checkpoint), sel)).patch;
        dest = path.join(store.paths(runId).artifacts, `${scope === 'thread' ? 'thread-' : ''}${checkpoint !== undefined ? `checkpoint-${checkpoint}-` : ''}${files || selection?.length ? `selection-${Date.now()}.patch` : 'result.patch'}`);
        await mkdir(path.dirname(dest), { recursive: true });
        await writeFile(dest, patch);
      }
      return { path: dest, bytes: patch.length, sha256: sha256Hex(patch), ...(patch.length <= PATCH_TEXT_BYTES ? { text: patch.toString('utf8') } : {}) };
    },
    async savePatch() {
      throw new AirlockError('INVALID_INPUT', 'Saving through a dialog needs the desktop app; in a browser, use Download patch.');
    },
    async mergeView({ runId, scope, path: file, targetDir }) {
      ended(runId, 'resolve its files');
      return mergeViewOfRun({ store, run: await store.get(runId), path: file, ...(scope ? { scope } : {}), ...(targetDir ? { targetDir } : {}) });
    },
    async resolve({ runId, scope, path: file, content, oursSha256, theirsSha256, targetDir }) {
      ended(runId, 'resolve its files');
      return resolveRunConflict({ store, run: await store.get(runId), path: file, content, oursSha256, ...(theirsSha256 ? { theirsSha256 } : {}), ...(scope ? { scope } : {}), ...(targetDir ? { targetDir } : {}) });
    },
    onDidChange: runs.onDidChangeFiles,
  };
}

/** Terminal replay (the full logs on disk) and interactive shells. */
function terminalsService(parts: ServiceParts): TerminalsService {
  const { store, shells, terminalOutput } = parts;
  return {
    replay: ({ terminalId, offset, maxBytes }) => replayTerminal(store, terminalId, offset, maxBytes),
    write: async ({ terminalId, data }) => ({ written: shells.write(terminalId, data) }),
    resize: async ({ terminalId, cols, rows }) => ({ resized: shells.resize(terminalId, cols, rows) }),
    close: async ({ terminalId }) => ({ closed: shells.close(terminalId) }),
    onDidData: (listener) => terminalOutput.event((o) => listener(toTerminalChunk(o))),
  };
}

const ENGINE_FIELDS = ['engine', 'engineHost', 'engineAllowInsecure'] as const;

/** Environment variables that win over the engine and VM settings in this process. */
const SETTING_OVERRIDES = ['AIRLOCK_ENGINE_HOST', 'AIRLOCK_ENGINE', 'AIRLOCK_ENGINE_ALLOW_INSECURE', 'AIRLOCK_VM_ACCEL'] as const;

/** The environment without the variables that override the engine settings: what the settings alone give. */
function withoutEngineOverrides(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const { AIRLOCK_ENGINE_HOST: _h, AIRLOCK_ENGINE: _e, AIRLOCK_ENGINE_ALLOW_INSECURE: _i, ...rest } = env;
  return rest;
}

/**
 * The engine fields as they would be saved, checked with the parser every connection uses; a bad
 * address is INVALID_INPUT on the `engineHost` field, so the form marks it and nothing is saved.
 */
async function validateEngineSettings(env: NodeJS.ProcessEnv, s: Pick<Settings, 'engine' | 'engineHost' | 'engineAllowInsecure'>): Promise<void> {
  const host = s.engineHost?.trim();
  if (!host) return;
  try {
    await validateEngineSelection(withoutEngineOverrides(env), { host, allowInsecure: s.engineAllowInsecure === true, choice: s.engine ?? 'auto' });
  } catch (err) {
    if (err instanceof AirlockError && err.kind === 'INVALID_INPUT') throw new AirlockError('INVALID_INPUT', err.message, { field: 'engineHost', cause: err });
    throw err;
  }
}

/** Settings (no secrets), what the app is, and Check connection for the engine fields. */
function settingsService(parts: ServiceParts): SettingsService {
  const { core } = parts;
  return {
    get: () => core.settings.get(),
    async update(patch) {
      const current = await core.settings.get();
      // Checked when they change (a saved address whose context has gone does not block saving the theme).
      if (ENGINE_FIELDS.some((f) => f in patch && patch[f] !== current[f])) await validateEngineSettings(core.env, { ...current, ...patch });
      // The core switches engines for the next sandbox when these change (SandboxManagers.onSettingsChanged).
      return core.settings.update(patch);
    },
    async appInfo() {
      const overrides = SETTING_OVERRIDES.filter((name) => core.env[name]);
      return { version: APP_VERSION, platform: `${process.platform}-${process.arch}`, dataDir: core.home, ...(overrides.length ? { overrides } : {}) };
    },
    async checkEngine(input) {
      await validateEngineSettings(core.env, input);
      const host = input.engineHost?.trim();
      const ctx: DoctorContext = {
        app: core.app,
        env: withoutEngineOverrides(core.env),
        options: { build: false, agents: false },
        state: new Map(),
        engineSelection: { ...(host ? { host } : {}), allowInsecure: input.engineAllowInsecure === true, choice: input.engine ?? 'auto' },
        progress: () => undefined,
        progressDone: () => undefined,
      };
      // The setup check's own engine check, on the values entered (docs/architecture.md §13).
      let finding: DoctorFinding;
      try {
        finding = await engineCheck.run(ctx);
      } catch (err) {
        finding = failedFinding(err);
      } finally {
        (ctx.state.get('engine') as { dispose(): void } | undefined)?.dispose();
      }
      const found = ctx.state.get('engineFound') as EngineFound | undefined;
      return {
        check: { id: engineCheck.id, label: engineCheck.label, ...finding },
        ...(found && finding.status === 'ok'
          ? {
              engine: {
                kind: found.description.kind,
                version: found.version,
                apiVersion: found.apiVersion,
                address: found.display,
                transport: found.description.transport,
                remote: found.description.remote,
                source: found.description.source,
                summary: describeEngine(found.description, found.version),
              },
            }
          : {}),
      };
    },
    onDidChange: core.settings.onDidChange,
  };
}

/** Choosing a project folder: the system dialog where there is one, a names-only browser under home. */
function projectsService(pickFolder: FolderPicker | undefined): ProjectsService {
  return {
    async pickFolder({ defaultPath }) {
      return pickFolder ? { native: true, path: await pickFolder(defaultPath) } : { native: false, path: null };
    },
    listFolders: ({ path: dir }) => listFolders(dir),
  };
}

/** A run's audit and apply logs: verify and read. */
/**
 * The MCP door's UI side (docs/architecture.md §17): apply requests from MCP clients (any process,
 * shared through `<home>/mcp/approvals`) answered by the user, and the app's own door over HTTP on
 * loopback, started and stopped by the `mcpHttp` setting.
 */
function mcpService(parts: ServiceParts, services: () => AirlockServices, announce: boolean): { service: McpService; dispose(): Promise<void> } {
  const { core } = parts;
  const approvals = new ApplyApprovals(core.home);
  const grants = new ClientGrants({ home: core.home, settings: core.settings });
  const watcher = approvals.watch();
  const folderWatcher = grants.folders.watch();
  // While the app runs, a client process asks the user here for folders not granted (§17).
  const presence = (announce ? announceApp(core.home) : Promise.resolve(undefined)).catch((err: unknown) => {
    debugLog.note('mcp.announceApp', err);
    return undefined;
  });
  let door: Promise<McpHttpServer> | undefined;
  let doorError: string | undefined;
  const sync = async (s: Settings) => {
    if (s.mcpHttp && !door) {
      doorError = undefined;
      door = startMcpHttpServer({ core, services: services(), approvals, grants, allowApply: false, approveHint: 'Approve it in this app (a banner shows the exact change)' });
      door.catch((err: unknown) => {
        doorError = (err as Error).message;
        door = undefined;
      });
    } else if (!s.mcpHttp && door) {
      const closing = door;
      door = undefined;
      await (await closing.catch(() => undefined))?.close(); // a door that failed to open has nothing to close
    }
  };
  const settingsSub = core.settings.onDidChange((s) => void sync(s));
  void core.settings.get().then(sync);
  return {
    service: {
      async info() {
        const s = await core.settings.get();
        const http = s.mcpHttp ? await door?.catch(() => undefined) : undefined; // a door that failed to open shows as none
        const cmd = await resolveAirlockCommand(resourcePaths(), core.env);
        return {
          http: { enabled: s.mcpHttp === true, ...(http ? { url: http.url, token: http.token } : {}), ...(doorError ? { error: doorError } : {}) },
          setup: mcpSetupLines(http ? { url: http.url, token: http.token } : undefined, cmd),
          command: { text: [cmd.command, ...cmd.args].join(' '), onPath: cmd.onPath },
        };
      },
      // The environment the app was given (its AIRLOCK_HOME, its PATH), as a client started from it would have.
      testSetup: async () => checkStdioSetup(await resolveAirlockCommand(resourcePaths(), core.env), core.env),
      applyRequests: () => approvals.pending(),
      answerApply: async ({ requestId, approved }) => ({ answered: await approvals.answer(requestId, approved) }),
      onDidChangeApplyRequests: watcher.onDidChange,
      folderRequests: () => grants.folders.pending(),
      async answerFolder({ requestId, approved, remember }) {
        const req = await grants.folders.get(requestId);
        if (!req) return { answered: false };
        // Remembered: the folder joins the grants in Settings (no network, no secrets beyond the defaults).
        if (approved && remember) {
          const s = await core.settings.get();
          const list = s.mcpProjects ?? [];
          if (!list.some((g) => g.dir === req.projectDir)) await core.settings.update({ mcpProjects: [...list, { dir: req.projectDir }] });
        }
        return { answered: await grants.folders.answer(requestId, approved) };
      },
      onDidChangeFolderRequests: folderWatcher.onDidChange,
    },
    async dispose() {
      settingsSub.dispose();
      watcher.dispose();
      folderWatcher.dispose();
      await (await presence)?.dispose();
      const closing = door;
      door = undefined;
      await (await closing?.catch(() => undefined))?.close(); // a door that failed to open has nothing to close
      await grants.dispose();
    },
  };
}

function auditService(parts: ServiceParts): AuditService {
  const { store, logsOf } = parts;
  return {
    async verify({ runId }) {
      const result = await verifyRunLogs(logsOf(await store.get(runId)));
      return result.ok
        ? { runId, intact: true, records: result.count, ...(result.applies !== undefined ? { applies: result.applies } : {}) }
        : { runId, intact: false, records: result.index, firstBroken: { index: result.index, reason: result.reason, ...(result.log ? { log: result.log } : {}) } };
    },
    async read({ runId, offset, limit }) {
      return readRunLogs(logsOf(await store.get(runId)), offset, limit);
    },
  };
}
