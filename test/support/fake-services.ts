import { AirlockError } from '../../contracts/errors';
import { newRunId } from '../../contracts/ids';
import type { AgentEvent, ChangedFile, EngineCheckInput, EngineCheckResult, KeyInfo, PreviewPort, ProviderInfo, RunEvent, RunRecord, RunSummary, SecretView, Settings, TerminalChunk } from '../../contracts';
import { isFinalStatus, runTerminalId } from '../../contracts';
import { Emitter } from '../../core/common/disposable';
import type { AirlockServices } from '../../core/api/services';

/** The digest `diffs:list` reports for every fake run's result; `diffs:apply` insists on it. */
export const FAKE_PATCH_SHA256 = 'ab'.repeat(32);

/**
 * An in-memory AirlockServices for tests of the transports and the UI (not of the core): runs are
 * scripted (a few commands, a changed file, an approval in `ask` mode). The real implementation
 * is `core/app.ts`.
 */
export interface FakeServices extends AirlockServices {
  /** Emits terminal output for a run as if its command printed it. */
  emitOutput(runId: string, data: string): void;
  /** Emits a run event as the core would (a host-observed network event, say). */
  emitEvent(runId: string, event: RunEvent['event']): void;
  /** Finishes a live run (`done`). */
  finish(runId: string): void;
  readonly calls: Array<{ channel: string; args: unknown }>;
}

const now = () => new Date().toISOString();

export interface FakeServicesOptions {
  autoFinish?: boolean;
  /** More providers than Anthropic and OpenAI (subscription credentials, say). */
  providers?: ProviderInfo[];
  /** Stands in for the core's checks on `settings:update` (throw to refuse; nothing is saved then). */
  checkSettings?: (patch: Partial<Settings>) => void;
  /** Stands in for `settings:checkEngine` (the real check needs the core and an engine). */
  checkEngine?: (input: EngineCheckInput) => Promise<EngineCheckResult>;
}

export function createFakeServices(opts: FakeServicesOptions = {}): FakeServices {
  const calls: FakeServices['calls'] = [];
  const keys = new Map<string, KeyInfo>();
  const providers = new Map<string, ProviderInfo>([
    ['anthropic', { id: 'anthropic', label: 'Anthropic', kind: 'anthropic', baseUrl: 'https://api.anthropic.com', requiresKey: true, builtin: true, models: ['claude-sonnet-4-5'], hasKey: false }],
    ['openai', { id: 'openai', label: 'OpenAI', kind: 'openai', baseUrl: 'https://api.openai.com/v1', requiresKey: true, builtin: true, models: ['gpt-5'], hasKey: false }],
    ...(opts.providers ?? []).map((p): [string, ProviderInfo] => [p.id, { ...p }]),
  ]);
  const runs = new Map<string, { record: RunRecord; events: RunEvent[]; files: ChangedFile[]; log: string; termSeq: number; previews?: PreviewPort[] }>();
  let settings: Settings = {
    theme: 'system', notifications: true, transcripts: false, defaultAgent: 'builtin', defaultApproval: 'auto',
    defaultIsolation: 'container', defaultNetwork: 'none', defaultTimeoutSec: 1800, defaultAllowlist: [],
  };
  const status = new Emitter<RunSummary>();
  const runEvent = new Emitter<RunEvent>();
  const termData = new Emitter<TerminalChunk>();
  const diffChange = new Emitter<{ runId: string }>();
  /** Branches applied to so far (fake projects share one repository). */
  const branches = new Set<string>();
  const keyChange = new Emitter<{ provider: string }>();
  const buildProgress = new Emitter<{ buildId: string; phase: 'check' | 'context' | 'build' | 'done' | 'failed'; message: string; fraction?: number }>();
  const settingsChange = new Emitter<Settings>();
  let counter = 0;

  const log = <T>(channel: string, args: T) => { calls.push({ channel, args }); };
  const get = (runId: string) => {
    const r = runs.get(runId);
    if (!r) throw new AirlockError('NOT_FOUND', `no run ${runId}; list runs with 'airlock runs'`);
    return r;
  };
  const summary = (r: RunRecord): RunSummary => {
    const { customCommand: _c, allowlist: _a, limits: _l, excludedFiles: _e, summary: _s, patchPath: _p, wipe: _w, ...rest } = r;
    return rest;
  };
  const push = (runId: string, event: RunEvent['event']) => {
    const r = get(runId);
    const e: RunEvent = { runId, seq: r.events.length, at: now(), event };
    r.events.push(e);
    runEvent.fire(e);
  };
  const setStatus = (runId: string, next: RunRecord['status'], phase?: string) => {
    const r = get(runId);
    r.record.status = next;
    r.record.phase = phase;
    if (next === 'running' && !r.record.startedAt) r.record.startedAt = now();
    if (isFinalStatus(next)) r.record.endedAt = now();
    push(runId, { type: 'status', status: next, phase });
    status.fire(summary(r.record));
  };
  const emitOutput = (runId: string, data: string) => {
    const r = get(runId);
    r.log += data;
    // The fake's log is text and its output ASCII: characters stand in for log bytes.
    termData.fire({ kind: 'data', terminalId: runTerminalId(runId), runId, seq: r.termSeq++, data, end: r.log.length });
  };
  const agent = (runId: string, e: AgentEvent) => push(runId, e);
  const finish = (runId: string) => {
    const r = get(runId);
    if (isFinalStatus(r.record.status)) return;
    agent(runId, { type: 'finished', summary: 'Added a greeting to README.md.', reason: 'finish' });
    r.record.summary = 'Added a greeting to README.md.';
    setStatus(runId, 'collecting', 'collecting changes');
    setStatus(runId, 'wiping', 'wiping sandbox');
    r.record.wipe = { verified: true, removed: [], leftovers: [], at: now() };
    setStatus(runId, 'done');
  };

  const script = async (runId: string) => {
    const r = get(runId);
    const tick = () => new Promise((res) => setTimeout(res, 20));
    setStatus(runId, 'preparing', 'copying project');
    await tick();
    setStatus(runId, 'running', 'agent working');
    agent(runId, { type: 'assistant_text', delta: 'I will look at the project first.' });
    agent(runId, { type: 'command_started', id: 'c1', command: 'ls -la', cwd: '/workspace' });
    emitOutput(runId, '$ ls -la\r\ntotal 8\r\n-rw-r--r-- 1 agent agent 12 README.md\r\n');
    agent(runId, { type: 'command_exited', id: 'c1', exitCode: 0, durationMs: 5, timedOut: false });
    r.files = [
      { path: 'README.md', status: 'modified', binary: false, additions: 1, deletions: 0 },
      { path: '.github/workflows/ci.yml', status: 'added', binary: false, additions: 3, deletions: 0, risky: 'CI workflow: runs on every push' },
    ];
    r.record.changedFiles = r.files.length;
    agent(runId, { type: 'file_changed', paths: r.files.map((f) => f.path) });
    diffChange.fire({ runId });
    agent(runId, { type: 'usage', inputTokens: 1200, outputTokens: 300, costUsd: 0.0081 });
    r.record.usage = { inputTokens: 1200, outputTokens: 300, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0.0081, requests: 1 };
    status.fire(summary(r.record));
    if (r.record.approval === 'ask') {
      r.record.pendingApproval = { requestId: 'a1', command: 'npm test', requestedAt: now() };
      agent(runId, { type: 'approval_request', id: 'a1', command: 'npm test' });
      status.fire(summary(r.record));
      return; // runs:approve continues
    }
    if (opts.autoFinish !== false) finish(runId);
  };

  const secrets = new Map<string, SecretView>();
  const services: FakeServices = {
    calls,
    emitOutput,
    emitEvent: push,
    finish,
    previewPorts() {
      return [...runs.values()].filter((r) => !isFinalStatus(r.record.status)).flatMap((r) => r.previews ?? []);
    },
    async activeRunIds() {
      return [...runs.values()].filter((r) => !isFinalStatus(r.record.status)).map((r) => r.record.id);
    },
    async dispose() {
      for (const e of [status, runEvent, termData, diffChange, keyChange, buildProgress, settingsChange]) e.dispose();
    },
    sandboxes: {
      async doctor() {
        return {
          ready: true,
          checkedAt: now(),
          checks: [
            { id: 'docker.engine', label: 'Docker engine', status: 'ok', detail: 'Docker 20.10 answers' },
            { id: 'image', label: 'Sandbox image', status: 'warn', detail: 'not built yet', fix: 'Build the image (about a minute).', fixAction: 'build-image' },
          ],
        };
      },
      async debugLog() {
        return { notes: [{ at: now(), where: 'sandbox.destroy', message: 'the engine did not answer' }] };
      },
      async buildImage(args) {
        log('sandboxes:buildImage', args);
        const buildId = `b${++counter}`;
        for (const [i, phase] of (['check', 'context', 'build', 'done'] as const).entries()) {
          buildProgress.fire({ buildId, phase, message: phase, fraction: (i + 1) / 4 });
          await new Promise((res) => setTimeout(res, 5));
        }
        return { buildId, image: 'airlock-sandbox:test', durationMs: 20 };
      },
      onDidBuildProgress: buildProgress.event,
    },
    keys: {
      async list() {
        return [...providers.values()].map((p) => keys.get(p.id) ?? { provider: p.id, hasKey: false, last4: null, baseUrl: p.baseUrl, addedAt: null });
      },
      async set(args) {
        log('keys:set', { provider: args.provider });
        const info: KeyInfo = { provider: args.provider, hasKey: true, last4: args.key.slice(-4), baseUrl: args.baseUrl ?? providers.get(args.provider)?.baseUrl ?? null, addedAt: now(), storage: args.storage };
        keys.set(args.provider, info);
        const p = providers.get(args.provider);
        if (p) p.hasKey = true;
        keyChange.fire({ provider: args.provider });
        return info;
      },
      async setBaseUrl({ provider, baseUrl }) {
        log('keys:setBaseUrl', { provider, baseUrl });
        const p = providers.get(provider);
        if (p) p.baseUrl = baseUrl;
        const info: KeyInfo = { ...(keys.get(provider) ?? { provider, hasKey: false, last4: null, addedAt: null }), baseUrl };
        if (keys.has(provider)) keys.set(provider, info);
        keyChange.fire({ provider });
        return info;
      },
      async setSubscription(args) {
        const provider = args.kind;
        log('keys:setSubscription', { kind: args.kind });
        const info: KeyInfo = { provider, hasKey: true, last4: null, baseUrl: providers.get(provider)?.baseUrl ?? null, addedAt: now(), storage: args.storage, credential: args.kind };
        keys.set(provider, info);
        const p = providers.get(provider);
        if (p) p.hasKey = true;
        keyChange.fire({ provider });
        return info;
      },
      async importCodex(args) {
        log('keys:importCodex', args);
        const info: KeyInfo = { provider: 'chatgpt-signin', hasKey: true, last4: null, baseUrl: null, addedAt: now(), storage: args.storage, credential: 'chatgpt-signin' };
        keys.set('chatgpt-signin', info);
        keyChange.fire({ provider: 'chatgpt-signin' });
        return info;
      },
      async remove({ provider }) {
        const removed = keys.delete(provider);
        const p = providers.get(provider);
        if (p) p.hasKey = false;
        keyChange.fire({ provider });
        return { removed };
      },
      async test({ provider }) {
        if (!keys.has(provider)) throw new AirlockError('KEY_MISSING', `no key for ${provider}; add one first`);
        return { provider, status: 'ok', message: 'the provider accepted the key', latencyMs: 3 };
      },
      async status() {
        return { available: true };
      },
      onDidChange: keyChange.event,
    },
    providers: {
      async list() {
        return [...providers.values()];
      },
      async add(args) {
        const p: ProviderInfo = { id: args.id, label: args.label ?? args.id, kind: args.kind, baseUrl: args.baseUrl, requiresKey: args.requiresKey, builtin: false, models: args.models, hasKey: Boolean(args.key) };
        providers.set(args.id, p);
        if (args.key) keys.set(args.id, { provider: args.id, hasKey: true, last4: args.key.slice(-4), baseUrl: args.baseUrl, addedAt: now() });
        keyChange.fire({ provider: args.id });
        return p;
      },
      async remove({ id }) {
        return { removed: providers.delete(id) };
      },
    },
    runs: {
      async start(args) {
        log('runs:start', args);
        if (!providers.has(args.provider)) throw new AirlockError('PROVIDER_UNKNOWN', `unknown provider '${args.provider}'; add it under Keys & providers`);
        const id = newRunId(Date.now() + ++counter);
        const record: RunRecord = {
          id, task: args.task, projectDir: args.projectDir, agent: args.agent, provider: args.provider, model: args.model,
          status: 'queued', createdAt: now(), startedAt: null, endedAt: null,
          usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, requests: 0 }, changedFiles: 0,
          isolation: args.isolation, network: args.network, approval: args.approval, limits: args.limits,
          excludedFiles: [{ path: '.env', reason: 'environment file (may hold secrets)' }],
        };
        runs.set(id, { record, events: [], files: [], log: '', termSeq: 0 });
        void script(id);
        return summary(record);
      },
      // Like the core: the parent must have ended; its agent, provider, model and policies carry over.
      async continue(args) {
        log('runs:continue', args);
        const parent = get(args.runId).record;
        if (!isFinalStatus(parent.status)) throw new AirlockError('CONFLICT', `Run ${parent.id} is still ${parent.status}; continue it once it has ended.`);
        const id = newRunId(Date.now() + ++counter);
        const agentKind = args.agent ?? parent.agent;
        const record: RunRecord = {
          ...parent,
          id, task: args.task, agent: agentKind, provider: args.provider ?? parent.provider, model: args.model ?? parent.model,
          status: 'queued', createdAt: now(), startedAt: null, endedAt: null, applied: undefined,
          usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, requests: 0 }, changedFiles: 0,
          thread: { rootRunId: parent.thread?.rootRunId ?? parent.id, parentRunId: parent.id, turn: (parent.thread?.turn ?? 1) + 1, conversation: agentKind === parent.agent ? 'carried' : 'fresh' },
        };
        runs.set(id, { record, events: [], files: [], log: '', termSeq: 0 });
        void script(id);
        return summary(record);
      },
      async previewExcluded({ projectDir }) {
        return { projectDir, excluded: [{ path: '.env', reason: 'environment file (may hold secrets)' }], includedFiles: 3, includedBytes: 120, isGitRepo: true };
      },
      async list(args) {
        const all = [...runs.values()].map((r) => summary(r.record)).reverse();
        const filtered = args.status ? all.filter((s) => args.status?.includes(s.status)) : all;
        return filtered.slice(0, args.limit ?? filtered.length);
      },
      async get({ runId }) {
        return get(runId).record;
      },
      async cancel({ runId }) {
        const r = get(runId);
        if (!isFinalStatus(r.record.status)) {
          setStatus(runId, 'wiping', 'wiping sandbox');
          setStatus(runId, 'cancelled');
        }
        return summary(r.record);
      },
      async delete({ runId }) {
        const r = get(runId);
        if (!isFinalStatus(r.record.status)) throw new AirlockError('CONFLICT', 'the run is still going; stop it first');
        return { deleted: runs.delete(runId) };
      },
      async approve({ runId, requestId, approved }) {
        const r = get(runId);
        if (r.record.pendingApproval?.requestId !== requestId) return { accepted: false };
        r.record.pendingApproval = undefined;
        agent(runId, { type: 'approval_response', id: requestId, approved });
        if (approved) {
          agent(runId, { type: 'command_started', id: 'c2', command: 'npm test', cwd: '/workspace' });
          emitOutput(runId, '$ npm test\r\nall tests passed\r\n');
          agent(runId, { type: 'command_exited', id: 'c2', exitCode: 0, durationMs: 9, timedOut: false });
        }
        status.fire(summary(r.record));
        if (opts.autoFinish !== false) setTimeout(() => finish(runId), 10);
        return { accepted: true };
      },
      async events({ runId, afterSeq, limit }) {
        const r = get(runId);
        const events = r.events.filter((e) => e.seq > afterSeq).slice(0, limit);
        const last = events.at(-1);
        return { events, nextSeq: last ? last.seq : afterSeq, done: !last || last.seq === r.events.length - 1 };
      },
      async openShell({ runId }) {
        const r = get(runId);
        if (isFinalStatus(r.record.status)) throw new AirlockError('CONFLICT', 'the run has ended; its sandbox is gone');
        return { terminalId: `shell:${runId}:1` };
      },
      async publishPort(args) {
        log('runs:publishPort', args);
        const r = get(args.runId);
        if (isFinalStatus(r.record.status)) throw new AirlockError('CONFLICT', 'the run has ended; its published ports are closed');
        const hostPort = 40000 + args.port; // deterministic, so tests can assert the link
        r.previews = [...(r.previews ?? []).filter((p) => p.sandboxPort !== args.port), { sandboxPort: args.port, hostPort, url: `http://localhost:${hostPort}/` }];
        return { sandboxPort: args.port, hostPort, url: `http://localhost:${hostPort}/` };
      },
      async previewPorts({ runId }) {
        const r = get(runId);
        return isFinalStatus(r.record.status) ? [] : (r.previews ?? []);
      },
      async allowNetwork(args) {
        log('runs:allowNetwork', args);
        const r = get(args.runId);
        if (isFinalStatus(r.record.status) || r.record.network !== 'allowlist') {
          throw new AirlockError('CONFLICT', 'the run is not live under the allow-list network policy; nothing to allow');
        }
        return { allowed: true };
      },
      async answerNetwork(args) {
        log('runs:answerNetwork', args);
        get(args.runId);
        return { answered: false };
      },
      async answerMcp(args) {
        log('runs:answerMcp', args);
        get(args.runId);
        return { answered: false };
      },
      onDidChangeStatus: status.event,
      onDidEvent: runEvent.event,
    },
    diffs: {
      async checkpoints(args) {
        log('diffs:checkpoints', args);
        return { checkpoints: [] };
      },
      async list(args) {
        const { runId } = args;
        log('diffs:list', args);
        return { files: get(runId).files, patchSha256: FAKE_PATCH_SHA256 };
      },
      async file({ runId, path }) {
        const f = get(runId).files.find((x) => x.path === path);
        if (!f) throw new AirlockError('NOT_FOUND', `${path} did not change in this run`);
        const diff = path === 'README.md'
          ? `diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1,2 @@\n # demo\n+Hello from the agent\n`
          : `diff --git a/${path} b/${path}\nnew file mode 100644\n--- /dev/null\n+++ b/${path}\n@@ -0,0 +1,3 @@\n+on: push\n+jobs:\n+  x: {}\n`;
        return { path, status: f.status, binary: f.binary, tooLarge: false, diff };
      },
      async apply(args) {
        log('diffs:apply', args);
        if (args.reviewedSha256 !== FAKE_PATCH_SHA256) throw new AirlockError('CONFLICT', 'This is not the result that was reviewed.');
        const files = args.files ?? get(args.runId).files.map((f) => f.path);
        if (args.mode === 'branch' && args.branch) {
          // Like the core: an existing branch is refused, naming a free one.
          if (branches.has(args.branch)) throw new AirlockError('CONFLICT', `Branch '${args.branch}' already exists (this result may have been applied before); apply to a new branch such as '${args.branch}-2'. Nothing was applied.`, { field: 'branch', suggestion: `${args.branch}-2` });
          branches.add(args.branch);
          const r = get(args.runId);
          r.record.applied = { at: new Date().toISOString(), target: r.record.projectDir, branch: args.branch, files };
          status.fire(summary(r.record));
          return { applied: files, conflicts: [], held: [], unchanged: [], branch: args.branch, commit: 'c0ffee'.repeat(6) + 'abcd', author: 'Test User <test@example.invalid>' };
        }
        return { applied: files, conflicts: [], held: [], unchanged: [], branch: args.mode === 'branch' ? args.branch : undefined };
      },
      async exportPatch({ runId }) {
        return { path: `/tmp/${runId}.patch`, bytes: 10, text: 'diff --git' };
      },
      async preview({ runId, files }) {
        // The fake result has one digest; hunk selection is exercised against the real core.
        return { bytes: 10, sha256: FAKE_PATCH_SHA256, files: files ?? get(runId).files.map((f) => f.path), text: 'diff --git' };
      },
      async savePatch() {
        return { saved: false };
      },
      async images({ path }) {
        throw new AirlockError('NOT_FOUND', `${path} has no pictures in this fake run`);
      },
      async mergeView({ path }) {
        throw new AirlockError('NOT_FOUND', `${path} has no conflict in this fake run`);
      },
      async resolve({ path }) {
        throw new AirlockError('NOT_FOUND', `${path} has no conflict in this fake run`);
      },
      onDidChange: diffChange.event,
    },
    terminals: {
      async replay({ terminalId, offset, maxBytes }) {
        const runId = terminalId.split(':')[1] ?? '';
        const logText = get(runId).log;
        const data = logText.slice(offset, offset + maxBytes);
        return { data, nextOffset: offset + data.length, done: offset + data.length >= logText.length, totalBytes: logText.length };
      },
      async write() {
        return { written: true };
      },
      async resize() {
        return { resized: true };
      },
      async close() {
        return { closed: true };
      },
      onDidData: termData.event,
    },
    settings: {
      async get() {
        return settings;
      },
      async update(patch) {
        opts.checkSettings?.(patch);
        settings = { ...settings, ...patch };
        settingsChange.fire(settings);
        return settings;
      },
      async appInfo() {
        return { version: '0.1.0-test', platform: process.platform, dataDir: '/tmp/airlock-fake' };
      },
      async checkEngine(input) {
        log('settings:checkEngine', input);
        if (opts.checkEngine) return opts.checkEngine(input);
        // No engine behind the fakes: the real check lives in core (test/e2e/ui-settings.test.ts).
        return { check: { id: 'docker.engine', label: 'Container engine', status: 'skipped', detail: 'no engine in the fake services' } };
      },
      onDidChange: settingsChange.event,
    },
    audit: {
      async verify({ runId }) {
        return { runId, intact: true, records: get(runId).events.length };
      },
      async read({ runId }) {
        const records = get(runId).events.map((e, index) => ({ index, at: e.at, type: e.event.type, data: { ...e.event }, hash: index.toString(16).padStart(64, '0') }));
        return { records, total: records.length };
      },
    },
    projects: {
      async pickFolder() {
        return { native: false, path: null };
      },
      async listFolders({ path: dir }) {
        return { path: dir ?? '/home/fake', parent: dir ? '/home/fake' : null, home: '/home/fake', folders: dir ? [] : ['code'], truncated: false };
      },
    },
    secrets: {
      async list() {
        log('secrets:list', {});
        return [...secrets.values()];
      },
      async set(args) {
        log('secrets:set', { ...args, value: '(hidden)' });
        const hosts = args.preset === 'github' ? ['github.com', 'api.github.com', '*.githubusercontent.com'] : args.hosts;
        const forms = args.preset === 'github' ? ['bearer', 'basic:x-access-token'] : args.preset === 'npm' ? ['bearer'] : args.forms;
        const v = { name: args.name, hosts, forms, env: args.preset === 'github' ? ['GH_TOKEN', 'GITHUB_TOKEN'] : args.preset === 'npm' ? ['NPM_TOKEN'] : [], git: args.preset === 'github', npm: args.preset === 'npm', ...(args.preset ? { preset: args.preset } : {}), hasValue: true };
        secrets.set(args.name, v);
        return v;
      },
      async remove({ name }) {
        log('secrets:remove', { name });
        return { removed: secrets.delete(name) };
      },
    },
    mcpServers: {
      // The fake has no servers; the real screen is tested against the real core (ui-mcp-servers).
      async list() {
        return { servers: [], proposed: [] };
      },
      async add() {
        throw new AirlockError('INVALID_INPUT', 'the fake core keeps no MCP servers');
      },
      async remove() {
        return { removed: false };
      },
      async tools() {
        return { tools: [], cut: false };
      },
      async setRule() {
        throw new AirlockError('NOT_FOUND', 'no MCP server');
      },
      async pin() {
        throw new AirlockError('NOT_FOUND', 'no MCP server');
      },
      async login() {
        throw new AirlockError('NOT_FOUND', 'no MCP server');
      },
      async projectServers({ projectDir }) {
        return { projectDir, servers: [] };
      },
      async setProjectServers({ projectDir, servers }) {
        if (servers.length) throw new AirlockError('NOT_FOUND', 'no MCP server');
        return { projectDir, servers: [] };
      },
    },
    mcp: {
      async info() {
        return { http: { enabled: false }, setup: [], command: { text: 'airlock', onPath: true } };
      },
      async testSetup() {
        return { ok: true, tools: 0, ms: 0 };
      },
      async applyRequests() {
        return [];
      },
      async answerApply() {
        return { answered: false };
      },
      onDidChangeApplyRequests: () => ({ dispose() {} }),
      async folderRequests() {
        return [];
      },
      async answerFolder() {
        return { answered: false };
      },
      onDidChangeFolderRequests: () => ({ dispose() {} }),
    },
    // Attempt groups need real runs; the UI's compare view is tested against the real core (test/e2e/ui-compare.test.ts).
    attempts: {
      async start() {
        throw new AirlockError('INTERNAL', 'attempt groups are not faked');
      },
      async list() {
        return [];
      },
      async compare() {
        throw new AirlockError('NOT_FOUND', 'no attempt groups in the fake');
      },
      async export() {
        throw new AirlockError('NOT_FOUND', 'no attempt groups in the fake');
      },
      async apply() {
        throw new AirlockError('NOT_FOUND', 'no attempt groups in the fake');
      },
      onDidChange: () => ({ dispose() {} }),
    },
    environments: {
      async find() {
        return { options: [{ choice: 'airlock', label: "Airlock's own image", kind: 'airlock' as const, notApplied: [] }], selected: 'airlock' };
      },
      async plan() {
        return { text: "choice: auto → uses Airlock's own image\n" };
      },
      async list() {
        return { environments: [], totalBytes: 0, bases: [] };
      },
      async prune() {
        return { removed: [], kept: [], freedBytes: 0 };
      },
    },
  };
  return services;
}
