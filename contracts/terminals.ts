import { z } from 'zod';
import { RunId } from './ids';

/**
 * Terminal output of a run (the agent's commands) and of interactive shells. Output is pushed as
 * numbered chunks; transports bound what they buffer per client and, past the bound, replace
 * dropped chunks with a `gap` (docs/architecture.md §5) — the full log stays on disk (`terminals:replay`).
 */

/** A run's own terminal id is `run:<runId>`; shells get `shell:<runId>:<n>`. */
export const TerminalId = z.string().regex(/^(run|shell):[a-z0-9:-]+$/, 'not a terminal id');
export type TerminalId = z.infer<typeof TerminalId>;

/** The most interactive shells one run may have open at once (each is a PTY and a bash in its sandbox). */
export const MAX_SHELLS_PER_RUN = 8;

export function runTerminalId(runId: string): string {
  return `run:${runId}`;
}

export const TerminalData = z.object({
  kind: z.literal('data'),
  terminalId: TerminalId,
  runId: RunId,
  /** Increases with every chunk of this terminal; a transport that merges chunks carries the last seq. */
  seq: z.number().int().nonnegative(),
  /** UTF-8 text (decoded as a stream on the host, so characters are never split). */
  data: z.string(),
  /**
   * Bytes in the terminal's log once this chunk is in it. A view that replayed the log up to
   * `nextOffset` skips live chunks that end there or before, whichever transport was faster.
   */
  end: z.number().int().nonnegative().optional(),
});
export const TerminalGap = z.object({
  kind: z.literal('gap'),
  terminalId: TerminalId,
  runId: RunId,
  /** First and last chunk seq dropped from the live view. */
  fromSeq: z.number().int().nonnegative(),
  toSeq: z.number().int().nonnegative(),
  droppedBytes: z.number().int().nonnegative(),
  /** Log bytes once the last dropped chunk is in it (see TerminalData.end). */
  end: z.number().int().nonnegative().optional(),
});
export const TerminalExit = z.object({
  kind: z.literal('exit'),
  terminalId: TerminalId,
  runId: RunId,
  seq: z.number().int().nonnegative(),
  exitCode: z.number().int().nullable(),
});
export const TerminalChunk = z.discriminatedUnion('kind', [TerminalData, TerminalGap, TerminalExit]);
export type TerminalChunk = z.infer<typeof TerminalChunk>;

export const terminalsContracts = {
  /** Reads a terminal's full log from disk, in pages (history replay, filling a gap). */
  'terminals:replay': {
    input: z.strictObject({
      terminalId: TerminalId,
      offset: z.number().int().nonnegative().default(0),
      maxBytes: z.number().int().positive().max(8 * 1024 * 1024).default(1024 * 1024),
    }),
    output: z.object({ data: z.string(), nextOffset: z.number().int().nonnegative(), done: z.boolean(), totalBytes: z.number().int().nonnegative() }),
  },
  /** Types into an interactive shell. */
  'terminals:write': { input: z.strictObject({ terminalId: TerminalId, data: z.string().max(64 * 1024) }), output: z.object({ written: z.boolean() }) },
  /** Sets an interactive shell's PTY size (the view's columns and rows). */
  'terminals:resize': {
    input: z.strictObject({ terminalId: TerminalId, cols: z.number().int().min(2).max(1000), rows: z.number().int().min(2).max(1000) }),
    output: z.object({ resized: z.boolean() }),
  },
  /** Ends an interactive shell. */
  'terminals:close': { input: z.strictObject({ terminalId: TerminalId }), output: z.object({ closed: z.boolean() }) },
} as const;

export const terminalsEvents = {
  'terminals:onDidData': TerminalChunk,
} as const;
