import { randomBytes } from 'node:crypto';
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { ChangedFile, FileDiff, RunEvent } from '../contracts';
import { AirlockError } from '../contracts/errors';
import type { ProviderInfo } from '../contracts/keys';
import type { AuditRecordView } from '../contracts/audit';
import type { AirlockServices } from './api/services';
import { verifyAuditLog } from './audit';
import type { ChannelProcess } from './channel/channel-client';
import { Emitter, type Event } from './common/disposable';
import { packageVersion } from './common/resources';
import { toTerminalChunk, type TerminalOutput } from './common/terminal-output';
import { AirlockCore, createAirlockCore, readSlice, type AirlockCoreOptions } from './app';
import { toChangedFile, toRunRecordView, toRunSummary, type StoredRun } from './runs/run-record';
import { RunTerminal } from './runs/run-terminal';
import { defaultDoctorChecks, runDoctorChecks } from './doctor/doctor';
import { fileDiff, listChanges, type FileChange } from './workspace/changes';
import { snapshotProject } from './workspace/snapshot';
import { applyRunResult, classifyRisky, diffOf, loadRunResult, patchForFiles, writeRecordedPatch, type LoadedResult } from './runs/run-apply';
import { sha256 } from './workspace/collect';
import { asRead } from './runs/run-owner';

function mapEvent<A, B>(event: Event<A>, fn: (a: A) => B): Event<B> {
  return (listener) => event((a) => listener(fn(a)));
}

interface Shell {
  runId: string;
  process: ChannelProcess;
  terminal: RunTerminal;
}

/**
 * The contracts implemented by the real core (docs/architecture.md §5). Both transports — Electron IPC and
 * the loopback WebSocket host — reach the core only through these services and the router.
 */
export async function createAirlockServices(opts: AirlockCoreOptions & { warm?: boolean } = {}): Promise<AirlockServices> {
  const core = await createAirlockCore(opts);
  // The app lives long enough for a pre-started sandbox to pay off; the CLI does not warm.
  if (opts.warm !== false) void core.warm();
  return servicesFor(core);
}

/** A missing folder or a file given as the project: the form marks its folder field and offers the fix. */
function aboutProjectDir(err: unknown): unknown {
  if (err instanceof AirlockError && (err.kind === 'NOT_FOUND' || err.kind === 'INVALID_INPUT') && !err.field) {
    return new AirlockError(err.kind, err.message, { field: 'projectDir' });
  }
  return err;
}

export function servicesFor(core: AirlockCore): AirlockServices {
  const { store, runs, vault, catalog } = core;
  /** Every terminal's output as bytes; `terminals:onDidData` is the same decoded, for text transports. */
  const terminalOutput = new Emitter<TerminalOutput>();
  const shells = new Map<string, Shell>();
  let shellCounter = 0;
  let buildCounter = 0;
  const forwardRunTerminals = runs.onDidTerminalData((c) => terminalOutput.fire(c));

  /** What readers see: a run whose process is gone reads as interrupted (core/runs/run-owner.ts). */
  async function record(runId: string): Promise<StoredRun> {
    return asRead(await store.get(runId));
  }

  /**
   * Changed files: while the sandbox exists, its own listing (a hint for the live view: apply is
   * refused until the run ends); after, the result the host derived at collect.
   */
  async function changes(runId: string): Promise<{ files: FileChange[]; stored?: LoadedResult }> {
    const sandbox = runs.sandboxOf(runId);
    if (sandbox) {
      try {
        return { files: await listChanges(sandbox.channel) };
      } catch {
        // The sandbox went away between the check and the call: fall back to what was collected.
      }
    }
    try {
      const stored = await loadRunResult(store, runId);
      return { files: stored.result.changes, stored };
    } catch (err) {
      await record(runId); // NOT_FOUND for an unknown run
      if (err instanceof AirlockError && err.kind === 'INVALID_INPUT') throw err;
      return { files: [] };
    }
  }

  async function storedResult(runId: string): Promise<LoadedResult> {
    try {
      return await loadRunResult(store, runId);
    } catch (err) {
      const run = await record(runId);
      if (err instanceof AirlockError && err.kind === 'NOT_FOUND') throw new AirlockError('NOT_FOUND', `Run ${runId} has no result patch (status ${run.status}); a run's patch is collected when the agent stops.`);
      throw err;
    }
  }

  async function providerInfo(p: Awaited<ReturnType<typeof catalog.list>>[number]): Promise<ProviderInfo> {
    const key = await vault.info(p.id);
    return { id: p.id, label: p.label, kind: p.kind, baseUrl: p.baseUrl, requiresKey: p.requiresKey, builtin: p.builtin, models: p.models, hasKey: key.hasKey };
  }

  const services: AirlockServices = {
    sandboxes: {
      // The same checks as `airlock doctor`; the image is not built here (the UI offers it as a fix).
      doctor: () => runDoctorChecks(defaultDoctorChecks(), { env: core.env, options: { build: false, agents: false }, progress: () => undefined, progressDone: () => undefined }),
      async buildImage({ variant }) {
        const buildId = `b${++buildCounter}-${randomBytes(3).toString('hex')}`;
        const started = performance.now();
        const image = await core.image(variant);
        return { buildId, image, durationMs: Math.round(performance.now() - started) };
      },
      onDidBuildProgress: mapEvent(core.onDidBuildProgress, (p) => ({ buildId: p.variant, phase: p.phase, message: p.message, ...(p.fraction !== undefined ? { fraction: p.fraction } : {}) })),
    },
    keys: {
      list: () => vault.list(),
      async set({ provider, key, baseUrl, storage }) {
        await catalog.get(provider); // PROVIDER_UNKNOWN before anything is stored
        return vault.set(provider, key, { storage, ...(baseUrl ? { baseUrl } : {}) });
      },
      async remove({ provider }) {
        return { removed: await vault.remove(provider) };
      },
      test: ({ provider }) => vault.test(provider),
      status: () => vault.status(),
      onDidChange: vault.onDidChange,
    },
    providers: {
      async list() {
        return Promise.all((await catalog.list()).map(providerInfo));
      },
      async add({ id, label, kind, baseUrl, requiresKey, key, models }) {
        const config = await catalog.add({ id, baseUrl, kind, requiresKey, models, ...(label ? { label } : {}) });
        if (key) await vault.set(id, key, {});
        return providerInfo(config);
      },
      async remove({ id }) {
        await vault.remove(id).catch(() => false);
        return { removed: await catalog.remove(id) };
      },
    },
    runs: {
      async start(input) {
        // Checked before a run record exists: a folder that is not there is the form's error, not a failed run.
        const dir = path.resolve(input.projectDir);
        const st = await stat(dir).catch(() => undefined);
        if (!st) throw new AirlockError('NOT_FOUND', `Project folder ${dir} does not exist; choose an existing folder.`, { field: 'projectDir' });
        if (!st.isDirectory()) throw new AirlockError('INVALID_INPUT', `${dir} is not a folder; choose the project's folder.`, { field: 'projectDir' });
        return toRunSummary(await runs.start(input));
      },
      async previewExcluded({ projectDir }) {
        const snap = await snapshotProject(projectDir).catch((err: unknown) => {
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
      async list({ limit, status }) {
        const all = (await store.list()).runs.map(asRead);
        return all
          .filter((r) => !status || status.includes(r.status))
          .slice(0, limit ?? all.length)
          .map(toRunSummary);
      },
      async get({ runId }) {
        return toRunRecordView(await record(runId));
      },
      async cancel({ runId }) {
        return toRunSummary(await runs.cancel(runId));
      },
      async delete({ runId }) {
        if (runs.activeRunIds().includes(runId)) throw new AirlockError('CONFLICT', 'The run is still in progress; stop it first.');
        await record(runId);
        await store.delete(runId);
        return { deleted: true };
      },
      async approve({ runId, requestId, approved }) {
        return { accepted: await runs.approve(runId, requestId, approved) };
      },
      async events({ runId, afterSeq, limit }) {
        await record(runId);
        const events: RunEvent[] = [];
        let more = false;
        for await (const e of store.readEvents<RunEvent>(runId)) {
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
        const sandbox = runs.sandboxOf(runId);
        if (!sandbox) throw new AirlockError('CONFLICT', 'The run has no live sandbox (it has ended, or not started yet); a shell opens only while the run is in progress.');
        const terminalId = `shell:${runId}:${++shellCounter}`;
        const terminal = new RunTerminal(terminalId, runId, path.join(store.paths(runId).dir, `shell-${shellCounter}.log`), (c) => terminalOutput.fire(c));
        const proc = sandbox.channel.spawn({ argv: ['bash', '-l'], cwd: '/workspace', pty: { cols, rows }, env: { TERM: 'xterm-256color' } });
        proc.onStdout((d) => terminal.write(d));
        proc.onStderr((d) => terminal.write(d));
        // The shell ends by itself, or with the sandbox (the channel closes): either way it exits.
        void proc.exited
          .then((e) => terminal.exit(e.exitCode), () => terminal.exit(null))
          .finally(() => shells.delete(terminalId));
        shells.set(terminalId, { runId, process: proc, terminal });
        return { terminalId };
      },
      publishPort({ runId, port }) {
        return runs.publishPort(runId, port);
      },
      async allowNetwork({ runId, host, port, scope }) {
        await runs.allowNetwork(runId, host, port, scope);
        return { allowed: true };
      },
      onDidChangeStatus: mapEvent(runs.onDidChangeStatus, toRunSummary),
      onDidEvent: runs.onDidEvent,
    },
    diffs: {
      async list({ runId }) {
        const { files, stored } = await changes(runId);
        const risky = new Map(classifyRisky(files, stored?.patch).map((r) => [r.path, r.reason] as const));
        const views = files.map((f) => toChangedFile(f, risky.get(f.path)));
        // Risky files first: they are what the user must look at before applying.
        return { files: [...views.filter((f) => f.risky), ...views.filter((f) => !f.risky)], ...(stored ? { patchSha256: stored.result.patchSha256 } : {}) };
      },
      async file({ runId, path: file, context }): Promise<FileDiff> {
        const { files: list, stored } = await changes(runId);
        const change = list.find((c) => c.path === file);
        if (!change) throw new AirlockError('NOT_FOUND', `${file} did not change in run ${runId}.`);
        const base = { path: change.path, ...(change.oldPath ? { oldPath: change.oldPath } : {}), status: change.status, binary: change.binary, tooLarge: change.tooLarge, oldSize: change.oldSize, newSize: change.size };
        if (change.binary || change.tooLarge) return { ...base, diff: '' };
        const sandbox = runs.sandboxOf(runId);
        if (sandbox) {
          const d = await fileDiff(sandbox.channel, file, { ...(change.oldPath ? { oldPath: change.oldPath } : {}) });
          return { ...base, diff: d.diff };
        }
        void context;
        return { ...base, diff: diffOf(stored ?? (await storedResult(runId)), file) ?? '' };
      },
      async apply({ runId, files, mode, branch, targetDir, reviewedSha256 }) {
        if (runs.activeRunIds().includes(runId)) throw new AirlockError('CONFLICT', 'The run is still in progress; apply its result once it has ended.');
        const run = await record(runId);
        return applyRunResult({ store, run, reviewedSha256, ...(files ? { files } : {}), mode, ...(branch ? { branch } : {}), ...(targetDir ? { targetDir } : {}) });
      },
      async exportPatch({ runId, files, destPath }) {
        const loaded = await storedResult(runId);
        const patch = patchForFiles(loaded, files);
        const dest = destPath ? path.resolve(destPath) : path.join(store.paths(runId).artifacts, files ? `selection-${Date.now()}.patch` : 'result.patch');
        if (destPath) {
          // A patch written where the user asked is on its way to a project: it goes in the apply log.
          await writeRecordedPatch({ store, runId, dest, ...(files ? { files } : {}) });
        } else {
          await mkdir(path.dirname(dest), { recursive: true });
          await writeFile(dest, patch);
        }
        return { path: dest, bytes: patch.length, sha256: sha256(patch), ...(patch.length <= 2 * 1024 * 1024 ? { text: patch.toString('utf8') } : {}) };
      },
      onDidChange: runs.onDidChangeFiles,
    },
    terminals: {
      async replay({ terminalId, offset, maxBytes }) {
        const [kind, runId, n] = terminalId.split(':') as [string, string, string?];
        const file = kind === 'run' ? path.join(store.paths(runId).dir, 'terminal.log') : path.join(store.paths(runId).dir, `shell-${n}.log`);
        const { data, total } = await readSlice(file, offset, maxBytes);
        // Never end a page inside a UTF-8 sequence: back off to the last character boundary.
        let end = data.length;
        if (offset + end < total) while (end > 0 && ((data[end] ?? 0) & 0xc0) === 0x80) end--;
        return { data: data.subarray(0, end).toString('utf8'), nextOffset: offset + end, done: offset + end >= total, totalBytes: total };
      },
      async write({ terminalId, data }) {
        const shell = shells.get(terminalId);
        if (!shell) return { written: false };
        shell.process.write(data);
        return { written: true };
      },
      async resize({ terminalId, cols, rows }) {
        const shell = shells.get(terminalId);
        if (!shell) return { resized: false };
        shell.process.resize(cols, rows);
        return { resized: true };
      },
      async close({ terminalId }) {
        const shell = shells.get(terminalId);
        if (!shell) return { closed: false };
        shell.process.kill('SIGHUP');
        return { closed: true };
      },
      onDidData: (listener) => terminalOutput.event((o) => listener(toTerminalChunk(o))),
    },
    settings: {
      get: () => core.settings.get(),
      update: (patch) => core.settings.update(patch),
      async appInfo() {
        return { version: await packageVersion(), platform: `${process.platform}-${process.arch}`, dataDir: core.home };
      },
      onDidChange: core.settings.onDidChange,
    },
    audit: {
      async verify({ runId }) {
        const run = await record(runId);
        const anchor = run.audit && run.audit.count > 0 ? { minCount: run.audit.count, head: run.audit.head, headIndex: run.audit.count - 1 } : {};
        const paths = store.paths(runId);
        const result = await verifyAuditLog(paths.audit, { ...anchor, applyLog: paths.applyLog, ...(run.applyLog ? { applyAnchor: run.applyLog } : {}) });
        return result.ok
          ? { runId, intact: true, records: result.count, ...(result.applies !== undefined ? { applies: result.applies } : {}) }
          : { runId, intact: false, records: result.index, firstBroken: { index: result.index, reason: result.reason, ...(result.log ? { log: result.log } : {}) } };
      },
      async read({ runId, offset, limit }) {
        await record(runId);
        let text = '';
        // The apply log continues the chain (seq counts on), so its records read as the audit log's tail.
        for (const file of [store.paths(runId).audit, store.paths(runId).applyLog]) {
          try {
            const part = await readFile(file, 'utf8');
            text += part === '' || part.endsWith('\n') ? part : `${part}\n`;
          } catch {
            // no log (yet)
          }
        }
        const lines = text.split('\n').filter(Boolean);
        const records: AuditRecordView[] = [];
        for (const line of lines.slice(offset, offset + limit)) {
          try {
            const r = JSON.parse(line) as { seq: number; ts: string; type: string; data: Record<string, unknown>; hash: string };
            records.push({ index: r.seq, at: r.ts, type: r.type, data: r.data, hash: r.hash });
          } catch {
            // A torn line is reported by verify; reading skips it.
          }
        }
        return { records, total: lines.length };
      },
    },
    onDidTerminalOutput: terminalOutput.event,
    async activeRunIds() {
      return runs.activeRunIds();
    },
    async dispose() {
      forwardRunTerminals.dispose();
      for (const shell of shells.values()) shell.process.kill('SIGKILL');
      await core.dispose();
    },
  };
  return services;
}
