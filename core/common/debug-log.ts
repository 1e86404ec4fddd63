import { Emitter, type Event } from './disposable';

/** One error Airlock handled by itself (a best-effort step that failed), kept for `--debug` and the UI. */
export interface DebugNote {
  /** ISO time. */
  at: string;
  /** Which step swallowed it, e.g. `sandbox.destroy` (stable names, for searching). */
  where: string;
  /** The error's first line, cut to 300 characters. */
  message: string;
}

/** An unexpected error's stack, for `--debug` only. */
export interface DebugStack {
  /** What failed, e.g. `run <id>`. */
  where: string;
  stack: string;
}

const KEEP = 500;
const MAX_MESSAGE = 300;

/**
 * The one place errors swallowed on purpose go (docs/architecture.md §10): a best-effort cleanup
 * that failed is no reason to fail a run, but it must not vanish either. `airlock --debug` prints
 * notes as they happen; the setup check's "Debug log" shows the last ones. Messages are first lines
 * only: provider keys are `Secret`s (they print as `[REDACTED]`), and a first line holds no body.
 */
export class DebugLog {
  private readonly notes: DebugNote[] = [];
  private readonly emitter = new Emitter<DebugNote>();
  readonly onDidNote: Event<DebugNote> = this.emitter.event;
  private readonly stacks = new Emitter<DebugStack>();
  /** Stacks as they happen (`airlock --debug` prints them); none is kept. */
  readonly onDidStack: Event<DebugStack> = this.stacks.event;

  note(where: string, err: unknown): void {
    const text = err instanceof Error ? err.message : String(err);
    const first = text.split('\n')[0] ?? '';
    const note: DebugNote = { at: new Date().toISOString(), where, message: first.length > MAX_MESSAGE ? `${first.slice(0, MAX_MESSAGE)}…` : first };
    this.notes.push(note);
    if (this.notes.length > KEEP) this.notes.splice(0, this.notes.length - KEEP);
    this.emitter.fire(note);
  }

  /** A `.catch` handler that notes the error and resolves to undefined. */
  swallow(where: string): (err: unknown) => undefined {
    return (err) => {
      this.note(where, err);
      return undefined;
    };
  }

  /**
   * An unexpected error's whole stack, handed to whoever prints `--debug` output and kept nowhere:
   * stacks may hold paths, so they never reach records or the UI's notes.
   */
  stack(where: string, err: unknown): void {
    this.stacks.fire({ where, stack: err instanceof Error && err.stack ? err.stack : String(err) });
  }

  /** The last notes, oldest first. */
  recent(limit = KEEP): DebugNote[] {
    return this.notes.slice(-limit);
  }
}

/** The process's debug log. */
export const debugLog = new DebugLog();
