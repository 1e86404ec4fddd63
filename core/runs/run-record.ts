import { z } from 'zod';
import { ChangedFile, type FileChangeStatus } from '../../contracts/diffs';
import { ApprovalMode, RunApplied, RunRecord, RunSummary, Usage, type RunRecord as RunRecordView } from '../../contracts/runs';
import type { FileChange } from '../workspace/changes';
import { RunKind } from './run-spec';

/**
 * The persisted run record (`<home>/runs/<id>/run.json`): the contract's `RunRecord`
 * (contracts/runs.ts) with the changed files themselves instead of their count, and what only the
 * host needs (owner, sandbox, baseline, log anchors, the last apply). One schema: what the UI and
 * CLI see is this record minus the host-only fields (`toRunSummary`, `toRunRecordView`).
 */

/** The sandbox that ran the run: which driver, which image, the engine's id while it exists. */
export const RunSandbox = z.object({
  driver: z.enum(['docker', 'gvisor', 'qemu', 'lima', 'wsl']),
  image: z.string().optional(),
  /** The engine's id of the sandbox (for the reaper after a crash). */
  id: z.string().optional(),
  /** VMs: how the guest ran (`tcg` = software emulation) and why, including a retry under TCG after KVM failed. */
  accel: z.enum(['kvm', 'hvf', 'tcg']).optional(),
  accelNote: z.string().optional(),
  /** VMs: restored from the image's snapshot, or a cold kernel boot. */
  vmStartedFrom: z.enum(['snapshot', 'boot']).optional(),
  /** Containers: which engine and where ("Docker 20.10.24 over SSH at build-box (ssh://me@build-box)"). */
  engine: z.string().max(500).optional(),
});
export type RunSandbox = z.infer<typeof RunSandbox>;

/** A hash-chained log's anchor (record count + last hash), to catch a log cut at a record boundary. */
export const LogAnchor = z.object({ count: z.number().int().nonnegative(), head: z.string() });
export type LogAnchor = z.infer<typeof LogAnchor>;

export const StoredRun = RunRecord.omit({ changedFiles: true })
  .extend({
    /** Which pipeline ran it (run-spec.ts): an agent run, or an MCP session (whose agent, provider and model are display only). */
    kind: RunKind,
    updatedAt: z.string(),
    startedAt: z.string().nullable().default(null),
    endedAt: z.string().nullable().default(null),
    approval: ApprovalMode.default('auto'),
    usage: Usage.default({ inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, requests: 0 }),
    /** The changed files as collected (or so far), in the contract's shape. */
    changedFiles: z.array(ChangedFile).default([]),
    excludedFiles: RunRecord.shape.excludedFiles.default([]),
    limits: RunRecord.shape.limits.default({ timeoutSec: 1800 }),
    /** `<hostname>:<pid>` of the process driving the run; a crash leaves it dead. */
    owner: z.string().optional(),
    sandbox: RunSandbox,
    /** The project's state when the run started, for a three-way apply (git HEAD, tree digest…). */
    baseline: z.record(z.string(), z.unknown()).optional(),
    /** Anchor of the audit log. */
    audit: LogAnchor.optional(),
    /** Set when the result was applied. */
    applied: RunApplied.optional(),
    /** Anchor of the apply log. */
    applyLog: LogAnchor.optional(),
  })
  // A newer Airlock's fields are kept when this one rewrites the record.
  .loose();
export type StoredRun = z.infer<typeof StoredRun>;
/** What `RunStore.create` takes: defaults are filled in. */
export type StoredRunInput = z.input<typeof StoredRun>;

/** What lists and status pushes show: the stored record in the contract's shape. */
export function toRunSummary(run: StoredRun): RunSummary {
  const forwardPorts = run.environment?.forwardPorts;
  return RunSummary.parse({ ...run, changedFiles: run.changedFiles.length, ...(forwardPorts?.length ? { forwardPorts } : {}) });
}

/** Everything about one run, in the contract's shape (host-only fields left out). */
export function toRunRecordView(run: StoredRun): RunRecordView {
  return RunRecord.parse({ ...run, changedFiles: run.changedFiles.length });
}

const FILE_TYPE: Record<string, string> = { '100644': 'file', '100755': 'file', '120000': 'symlink', '160000': 'submodule' };

/**
 * A workspace change in the contract's shape, the one shape stored and served. A file that became
 * a symlink (or back) is `type-changed`; an executable bit flip is a `modeChange`.
 */
export function toChangedFile(c: FileChange, risky?: string): ChangedFile {
  const typeChanged = c.status === 'modified' && c.oldMode !== undefined && c.newMode !== undefined && FILE_TYPE[c.oldMode] !== FILE_TYPE[c.newMode];
  const status: FileChangeStatus = typeChanged ? 'type-changed' : c.status;
  return {
    path: c.path,
    ...(c.oldPath ? { oldPath: c.oldPath } : {}),
    status,
    binary: c.binary,
    additions: c.additions,
    deletions: c.deletions,
    ...(c.modeChanged ? { modeChange: `${c.oldMode ?? '—'} → ${c.newMode ?? '—'}` } : {}),
    ...(risky ? { risky } : {}),
  };
}

/**
 * Reads a record written by an earlier Airlock (before the schema followed the contract): usage
 * `modelCalls`, an `isolation` object, `excluded`, changed files with `kind`, the wipe's `verifiedAt`,
 * no run `kind`.
 * Anything else passes through unchanged.
 */
export function upgradeStoredRun(raw: unknown): unknown {
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) return raw;
  const r: Record<string, unknown> = { ...(raw as Record<string, unknown>) };
  const obj = (v: unknown) => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined);
  const usage = obj(r.usage);
  if (usage && 'modelCalls' in usage && !('requests' in usage)) {
    const { modelCalls, ...rest } = usage;
    r.usage = { ...rest, requests: modelCalls };
  }
  const isolation = obj(r.isolation);
  if (isolation) {
    r.isolation = isolation.kind === 'docker' ? 'container' : 'vm';
    r.network ??= isolation.network;
    r.sandbox ??= { driver: isolation.kind, ...(isolation.image ? { image: isolation.image } : {}), ...(isolation.sandboxId ? { id: isolation.sandboxId } : {}) };
  }
  if ('excluded' in r && !('excludedFiles' in r)) {
    r.excludedFiles = r.excluded;
    delete r.excluded;
  }
  if (Array.isArray(r.changedFiles)) {
    r.changedFiles = r.changedFiles.map((f: unknown) => {
      const file = obj(f);
      if (!file || !('kind' in file)) return f;
      const { kind, ...rest } = file;
      return { binary: false, additions: 0, deletions: 0, ...rest, status: kind };
    });
  }
  const wipe = obj(r.wipe);
  if (wipe && 'verifiedAt' in wipe) {
    const { verifiedAt, ...rest } = wipe;
    r.wipe = { ...rest, at: verifiedAt, verified: Array.isArray(wipe.leftovers) && wipe.leftovers.length === 0 };
  }
  // Before runs had a kind, a session was told by its pretend agent `mcp` (and its client's name).
  if (!('kind' in r)) r.kind = r.agent === 'mcp' || typeof r.mcpClient === 'string' ? 'session' : 'agent';
  const limits = obj(r.limits);
  if (limits && limits.timeoutSec === undefined) r.limits = { ...limits, timeoutSec: 1800 };
  if (!limits) r.limits = { timeoutSec: 1800 };
  return r;
}
