import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { debugLog } from '../common/debug-log';
import { Emitter, toDisposable, type Disposable, type Event } from '../common/disposable';
import { StoredFile, writeDurably } from '../common/stored-file';
import { parseStoredJson } from '../common/stored-json';

const POLL_MS = 250;

export type ConsentAnswer = 'approved' | 'refused' | 'expired';

/** What every request carries. */
export interface ConsentBase {
  requestId: string;
  requestedAt: string;
  expiresAt: string;
}

/** `<id>.answer.json`, written by the app when the user answers. */
const AnswerFile = z.object({ approved: z.boolean(), at: z.string() });

/**
 * Questions a client process asks the user, kept as files under `<home>/mcp/<kind>` so that `airlock
 * mcp` (a process a client started) and the app (whose UI the user answers in) share them without a
 * socket (docs/architecture.md §17): `<id>.request.json` from the asker, `<id>.answer.json` from
 * the app. Nothing in a sandbox can reach the folder (no host mounts).
 */
export class ConsentRequests<T extends ConsentBase> {
  readonly dir: string;
  private readonly noted = new Set<string>();

  constructor(
    home: string,
    kind: string,
    private readonly schema: z.ZodType<T>,
    /** The debug log's name for this kind (`mcp.apply`: `mcp.applyRequest`, `mcp.applyAnswer`). */
    private readonly noteKey: string,
  ) {
    this.dir = path.join(home, 'mcp', kind);
  }

  /** Records a request and returns it with its id and expiry. */
  async request(req: Omit<T, keyof ConsentBase>, ttlMs: number): Promise<T> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const now = Date.now();
    const full = this.schema.parse({ ...req, requestId: randomBytes(16).toString('hex'), requestedAt: new Date(now).toISOString(), expiresAt: new Date(now + ttlMs).toISOString() });
    await writeDurably(this.file(full.requestId, 'request'), JSON.stringify(full));
    return full;
  }

  /**
   * Waits for the user's answer (polling: the two processes share no socket). Expired or aborted:
   * `expired`. The request's files are removed once it is settled.
   */
  async wait(requestId: string, signal?: AbortSignal): Promise<ConsentAnswer> {
    try {
      for (;;) {
        const answer = await this.answerOf(requestId);
        if (answer) return answer;
        const req = await this.read(requestId);
        if (!req || Date.parse(req.expiresAt) <= Date.now() || signal?.aborted) return 'expired';
        await new Promise((r) => setTimeout(r, POLL_MS));
      }
    } finally {
      await this.forget(requestId);
    }
  }

  /** Requests still waiting, oldest first; expired ones are dropped. */
  async pending(): Promise<T[]> {
    const names = await readdir(this.dir).catch(() => [] as string[]);
    const ids = new Set(names.filter((n) => n.endsWith('.request.json')).map((n) => n.slice(0, -'.request.json'.length)));
    for (const n of names) if (n.endsWith('.answer.json')) ids.delete(n.slice(0, -'.answer.json'.length));
    const out: T[] = [];
    for (const id of ids) {
      const req = await this.read(id);
      if (req && Date.parse(req.expiresAt) > Date.now()) out.push(req);
    }
    return out.sort((a, b) => a.requestedAt.localeCompare(b.requestedAt));
  }

  /** A waiting request by id (undefined when unknown, damaged or expired). */
  async get(requestId: string): Promise<T | undefined> {
    if (!/^[0-9a-f]{32}$/.test(requestId)) return undefined;
    const req = await this.read(requestId);
    return req && Date.parse(req.expiresAt) > Date.now() ? req : undefined;
  }

  /** The user's answer; false when the request is unknown, expired or answered already. */
  async answer(requestId: string, approved: boolean): Promise<boolean> {
    if (!(await this.get(requestId))) return false;
    // One answer wins: a second one (another window, the CLI) finds the first and writes nothing.
    let answered = false;
    await new StoredFile<z.infer<typeof AnswerFile> | null>(this.file(requestId, 'answer'), { parse: answerOrRefusal, empty: () => null }).update((current) => {
      if (current) return current;
      answered = true;
      return { approved, at: new Date().toISOString() };
    });
    return answered;
  }

  /** Fires when the waiting requests may have changed (polled while someone listens). */
  watch(intervalMs = 1000): { onDidChange: Event<{ count: number }> } & Disposable {
    const changed = new Emitter<{ count: number }>();
    let last = '';
    const timer = setInterval(() => {
      void this.pending().then((p) => {
        const key = p.map((r) => r.requestId).join(',');
        if (key !== last) {
          last = key;
          changed.fire({ count: p.length });
        }
      });
    }, intervalMs);
    timer.unref();
    const d = toDisposable(() => {
      clearInterval(timer);
      changed.dispose();
    });
    return { onDidChange: changed.event, dispose: () => d.dispose() };
  }

  /** The user's answer, if given. A damaged answer file is a refusal (the safer reading), noted in the debug log. */
  private async answerOf(requestId: string): Promise<ConsentAnswer | undefined> {
    const file = this.file(requestId, 'answer');
    const text = await readFile(file, 'utf8').catch(() => undefined); // no answer file: not answered yet
    if (text === undefined) return undefined;
    try {
      return parseStoredJson(AnswerFile, file, text, 'the request is refused; the client may ask again.').approved ? 'approved' : 'refused';
    } catch (err) {
      debugLog.note(`${this.noteKey}Answer`, err);
      return 'refused';
    }
  }

  /** A waiting request; a damaged request file counts as none (never approvable), noted in the debug log. */
  private async read(requestId: string): Promise<T | undefined> {
    const file = this.file(requestId, 'request');
    const text = await readFile(file, 'utf8').catch(() => undefined); // no request file: none waiting
    if (text === undefined) return undefined;
    try {
      return parseStoredJson(this.schema, file, text, 'the request cannot be answered; the client may ask again.');
    } catch (err) {
      // Polled every second while the UI watches: said once per file.
      if (!this.noted.has(file)) debugLog.note(`${this.noteKey}Request`, err);
      this.noted.add(file);
      return undefined;
    }
  }

  private async forget(requestId: string): Promise<void> {
    await rm(this.file(requestId, 'request'), { force: true });
    await rm(this.file(requestId, 'answer'), { force: true });
  }

  private file(requestId: string, kind: 'request' | 'answer'): string {
    return path.join(this.dir, `${requestId}.${kind}.json`);
  }
}

/** A stored answer; a damaged one reads as a refusal (the safer reading, as `answerOf` does). */
function answerOrRefusal(_file: string, text: string): z.infer<typeof AnswerFile> {
  try {
    return AnswerFile.parse(JSON.parse(text));
  } catch {
    return { approved: false, at: '' };
  }
}
