import { mkdir, open, readFile, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { AirlockError } from '../../contracts/errors';
import { canonicalJson } from './canonical-json';
import { GENESIS_HASH, type AuditRecord, type AuditRecordData, type AuditRecordType } from './audit-records';
import { sha256Hex } from '../common/sha256';
import { auditRecordProblem } from './audit-record-schema';
import { debugLog } from '../common/debug-log';

/** The hash of a record: SHA-256 over the canonical JSON of everything but `hash`. */
export function hashAuditRecord(record: Omit<AuditRecord, 'hash'>): string {
  const { seq, ts, type, data, prev } = record;
  return sha256Hex(canonicalJson({ seq, ts, type, data, prev }));
}

/**
 * Result of checking a log. `index` is the 0-based line of the first bad record; `log: 'apply'`
 * says it is a line of the run's apply log. `applies` is the apply log's record count, when one was checked.
 */
export type AuditVerifyResult =
  | { ok: true; count: number; head: string; sealed: boolean; applies?: number }
  | { ok: false; index: number; reason: string; log?: 'apply' };

/** Where a chain starts: seq 0 after the genesis hash, or (an apply log) right after a seal. */
export interface ChainStart {
  seq: number;
  prev: string;
}

const GENESIS_START: ChainStart = { seq: 0, prev: GENESIS_HASH };

/** Record types an apply log may hold: it only ever records applies (and its own crash repair). */
const APPLY_LOG_TYPES: ReadonlySet<string> = new Set<AuditRecordType>(['apply', 'log_repaired']);

/** What the caller knows from elsewhere (the run record), to catch a log cut at a record boundary. */
export interface AuditExpectation {
  /** At least this many records must be present. */
  minCount?: number;
  /** The hash of a record the log must contain at position `headIndex` (default: the last one). */
  head?: string;
  headIndex?: number;
  /** The log must end with a `sealed` record. */
  sealed?: boolean;
  /**
   * The run's apply log. When the file exists it must continue this log's chain from its `sealed`
   * record (first `prev` = the seal's hash, seq counting on), hold only `apply` records and verify.
   */
  applyLog?: string;
  /** The apply log's anchor from the run record (count + last hash): catches one cut or deleted. */
  applyAnchor?: { count: number; head: string };
}

interface ParsedLog {
  records: AuditRecord[];
  /** Bytes after the last newline (a torn write), if any. */
  tail: string;
  failure?: { index: number; reason: string; torn?: boolean };
}

const HEX64 = /^[0-9a-f]{64}$/;

function checkLines(text: string, start: ChainStart = GENESIS_START): ParsedLog {
  const lines = text.split('\n');
  // The text after the last '\n' is a torn line if non-empty (every append ends with '\n').
  const tail = lines.pop() ?? '';
  const records: AuditRecord[] = [];
  let prev = start.prev;
  const anchored = start.prev !== GENESIS_HASH;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      return { records, tail, failure: { index: i, reason: line.trim() === '' ? 'empty line' : 'not valid JSON' } };
    }
    const problem = auditRecordProblem(value);
    if (problem) return { records, tail, failure: { index: i, reason: problem } };
    // The envelope is checked; its data's shape per type is the writer's (audit-records.ts), and the hash covers it.
    const rec = value as AuditRecord;
    // Checked before seq: a log chained to another run's seal mostly has other seqs too, and this is the real finding.
    if (i === 0 && anchored && rec.prev !== prev) {
      return { records, tail, failure: { index: i, reason: "not anchored to this run's seal: the first record's prev is not the hash of the audit log's sealed record (forged, or taken from another run)" } };
    }
    if (rec.seq !== start.seq + i) {
      return { records, tail, failure: { index: i, reason: `sequence broken: expected seq ${start.seq + i}, found ${String(rec.seq)} (a record was deleted, inserted or moved)` } };
    }
    if (rec.prev !== prev) {
      return { records, tail, failure: { index: i, reason: 'chain broken: prev does not match the previous record\'s hash' } };
    }
    if (!HEX64.test(rec.hash) || hashAuditRecord(rec) !== rec.hash) {
      return { records, tail, failure: { index: i, reason: 'hash mismatch: the record was modified' } };
    }
    if (i > 0 && records[i - 1]!.type === 'sealed') {
      return { records, tail, failure: { index: i, reason: 'record after the seal: the log was appended to after it was closed' } };
    }
    records.push(rec);
    prev = rec.hash;
  }
  if (tail !== '') {
    return { records, tail, failure: { index: lines.length, reason: 'torn last line: an incomplete write (crash) or truncation', torn: true } };
  }
  return { records, tail };
}

/**
 * Checks a log end to end: every line parses, seq counts 0,1,2…, each `prev` is the previous
 * `hash`, each `hash` recomputes, nothing follows a seal, and the file ends on a full line.
 * With `expect`, also catches a log cut at a record boundary. A missing file is an error.
 */
export async function verifyAuditLog(file: string, expect: AuditExpectation = {}): Promise<AuditVerifyResult> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { ok: false, index: 0, reason: 'the audit log does not exist' };
    throw err;
  }
  const parsed = checkLines(text);
  if (parsed.failure) return { ok: false, index: parsed.failure.index, reason: parsed.failure.reason };
  const { records } = parsed;
  const count = records.length;
  if (expect.minCount !== undefined && count < expect.minCount) {
    return { ok: false, index: count, reason: `truncated: ${count} records, the run record says at least ${expect.minCount}` };
  }
  if (expect.head !== undefined) {
    const at = expect.headIndex ?? count - 1;
    if (at < 0 || at >= count || records[at]!.hash !== expect.head) {
      return { ok: false, index: Math.max(0, Math.min(at, count)), reason: 'head mismatch: the log does not contain the record the run record points to (truncated or replaced)' };
    }
  }
  const sealed = count > 0 && records[count - 1]!.type === 'sealed';
  if (expect.sealed && !sealed) {
    return { ok: false, index: count, reason: 'the log ends without its seal record (truncated)' };
  }
  const ok = { ok: true as const, count, head: count > 0 ? records[count - 1]!.hash : GENESIS_HASH, sealed };
  if (expect.applyLog === undefined) return ok;
  const applies = await checkApplyLog(expect.applyLog, sealed ? records[count - 1]! : undefined, expect.applyAnchor);
  if (!applies.ok) return { ok: false, index: applies.index, reason: applies.reason, log: 'apply' };
  return applies.count === undefined ? ok : { ...ok, applies: applies.count };
}

/** Checks an apply log against the seal it must continue from; a missing file is fine unless the run record counts applies. */
async function checkApplyLog(
  file: string,
  seal: AuditRecord | undefined,
  anchor: { count: number; head: string } | undefined,
): Promise<{ ok: true; count?: number } | { ok: false; index: number; reason: string }> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    if (anchor && anchor.count > 0) return { ok: false, index: 0, reason: `the apply log does not exist, but the run record says it holds ${anchor.count} record(s) (deleted)` };
    return { ok: true };
  }
  if (!seal) return { ok: false, index: 0, reason: 'the apply log is not anchored: the audit log has no seal record for it to continue from' };
  const parsed = checkLines(text, { seq: seal.seq + 1, prev: seal.hash });
  if (parsed.failure) {
    const { index, reason } = parsed.failure;
    return { ok: false, index, reason: `apply log record ${index} (seq ${seal.seq + 1 + index}): ${reason}` };
  }
  const { records } = parsed;
  const bad = records.findIndex((r) => !APPLY_LOG_TYPES.has(r.type));
  if (bad >= 0) return { ok: false, index: bad, reason: `apply log record ${bad}: a '${records[bad]!.type}' record does not belong in an apply log` };
  if (anchor) {
    if (records.length < anchor.count) {
      return { ok: false, index: records.length, reason: `apply log truncated: ${records.length} record(s), the run record says at least ${anchor.count}` };
    }
    if (anchor.count > 0 && records[anchor.count - 1]!.hash !== anchor.head) {
      return { ok: false, index: anchor.count - 1, reason: `apply log record ${anchor.count - 1}: head mismatch: not the record the run record points to (truncated or replaced)` };
    }
  }
  return { ok: true, count: records.length };
}

export interface AuditLogOptions {
  /**
   * Strings that must never reach the log (the run token, say). Any string value containing one is
   * replaced by `[REDACTED]` before hashing — defence in depth, callers should not pass them at all.
   */
  secrets?: readonly string[];
  /** fdatasync after every append (default: only after `lifecycle`, `wipe` and `sealed` records, and on close). */
  syncEveryAppend?: boolean;
  /** Where the chain starts when the file is empty (default seq 0 after the genesis hash); an apply log starts after its run's seal. */
  chainStart?: ChainStart;
}

const SYNC_TYPES: ReadonlySet<AuditRecordType> = new Set(['lifecycle', 'wipe', 'sealed', 'run_created', 'apply']);

/**
 * An append-only, hash-chained JSONL audit log for one run.
 *
 * ```ts
 * const log = await AuditLog.open(paths.audit);
 * await log.append('lifecycle', { from: 'queued', to: 'preparing' });
 * await log.seal(); // when the run has ended
 * ```
 * Appends are serialised (safe to call without awaiting each); each record is one `write` of one
 * full line, so a crash leaves at most one torn last line, which `open` cuts off and records.
 */
export class AuditLog {
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;

  private constructor(
    readonly file: string,
    private readonly handle: FileHandle,
    private readonly firstSeq: number,
    private nextSeq: number,
    private lastHash: string,
    private readonly options: AuditLogOptions,
    private isSealed: boolean,
  ) {}

  /**
   * Opens (creating if needed) a log and resumes its chain. A torn last line is cut off and a
   * `log_repaired` record appended; a log whose chain is broken before that is refused (CONFLICT).
   */
  static async open(file: string, options: AuditLogOptions = {}): Promise<AuditLog> {
    await mkdir(path.dirname(file), { recursive: true });
    const handle = await open(file, 'a+');
    try {
      const text = (await handle.readFile()).toString('utf8');
      const start = options.chainStart ?? GENESIS_START;
      const parsed = checkLines(text, start);
      // Only a torn tail after an intact chain is a crash to repair; anything else is evidence.
      const tornOnly = parsed.failure?.torn === true;
      if (parsed.failure && !tornOnly) {
        throw new AirlockError('CONFLICT', `The audit log ${file} is broken at record ${parsed.failure.index} (${parsed.failure.reason}); it will not be appended to. Keep it as evidence and inspect it with 'airlock audit verify'.`);
      }
      const last = parsed.records[parsed.records.length - 1];
      const log = new AuditLog(file, handle, start.seq, start.seq + parsed.records.length, last?.hash ?? start.prev, options, last?.type === 'sealed');
      if (tornOnly) {
        const tailBytes = Buffer.byteLength(parsed.tail);
        await handle.truncate(Buffer.byteLength(text) - tailBytes);
        await log.append('log_repaired', { droppedBytes: tailBytes, droppedSha256: sha256Hex(parsed.tail) });
      }
      return log;
    } catch (err) {
      await handle.close().catch(debugLog.swallow('audit.close'));
      throw err;
    }
  }

  /** Number of records in the log. */
  get count(): number {
    return this.nextSeq - this.firstSeq;
  }

  /** Hash of the last record (64 zeros, or the chain start's `prev`, when empty). Store it in the run record to catch truncation. */
  get head(): string {
    return this.lastHash;
  }

  get sealed(): boolean {
    return this.isSealed;
  }

  /** Appends one record; resolves once it is written. Rejects after `seal`/`close`. */
  append<T extends AuditRecordType>(type: T, data: AuditRecordData[T]): Promise<AuditRecord<T>> {
    const run = this.queue.then(() => this.write(type, data));
    this.queue = run.catch(() => undefined); // the caller sees the error; the queue goes on
    return run;
  }

  /** Appends the `sealed` record and closes the log. */
  async seal(): Promise<AuditRecord<'sealed'>> {
    const rec = await this.append('sealed', { count: this.nextSeq + 1 });
    await this.close();
    return rec;
  }

  /** Waits for pending appends, syncs and closes the file. Idempotent. */
  async close(): Promise<void> {
    await this.queue;
    if (this.closed) return;
    this.closed = true;
    await this.handle.datasync().catch(debugLog.swallow('audit.datasync'));
    await this.handle.close();
  }

  private async write<T extends AuditRecordType>(type: T, data: AuditRecordData[T]): Promise<AuditRecord<T>> {
    if (this.closed) throw new AirlockError('CONFLICT', `The audit log ${this.file} is closed; open it again to append.`);
    if (this.isSealed) throw new AirlockError('CONFLICT', `The audit log ${this.file} is sealed; a finished run's log cannot be appended to.`);
    // Normalise through JSON so the hashed value is exactly what a reader will parse back.
    const clean = redact(JSON.parse(JSON.stringify(data ?? null)) as unknown, this.options.secrets ?? []) as AuditRecordData[T];
    const body = { seq: this.nextSeq, ts: new Date().toISOString(), type, data: clean, prev: this.lastHash };
    const record: AuditRecord<T> = { ...body, hash: hashAuditRecord(body) };
    await this.handle.write(`${JSON.stringify(record)}\n`);
    if (this.options.syncEveryAppend || SYNC_TYPES.has(type)) await this.handle.datasync();
    this.nextSeq += 1;
    this.lastHash = record.hash;
    if (type === 'sealed') this.isSealed = true;
    return record;
  }
}

function redact(value: unknown, secrets: readonly string[]): unknown {
  if (secrets.length === 0) return value;
  if (typeof value === 'string') return secrets.some((s) => s.length > 0 && value.includes(s)) ? '[REDACTED]' : value;
  if (Array.isArray(value)) return value.map((v) => redact(v, secrets));
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, redact(v, secrets)]));
  }
  return value;
}
