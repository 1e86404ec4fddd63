import { z } from 'zod';
import { ErrorInfo } from './errors';

/**
 * The frames of the WebSocket transport (core/host ⇄ renderer), JSON text frames. IPC in Electron
 * carries the same calls natively; only the browser transport needs these.
 */

export const ClientFrame = z.discriminatedUnion('t', [
  /** A contract call; answered by a `result` with the same id. */
  z.object({ t: z.literal('invoke'), id: z.number().int().nonnegative(), channel: z.string().max(100), input: z.unknown() }),
  /** Start receiving one push event. */
  z.object({ t: z.literal('sub'), event: z.string().max(100) }),
  z.object({ t: z.literal('unsub'), event: z.string().max(100) }),
  /**
   * Flow control of a terminal stream opened with `?ack=1`: of the data bytes that stream sent,
   * this many (a running total) are drawn or were skipped by the page.
   */
  z.object({ t: z.literal('ack'), stream: z.string().max(64), bytes: z.number().int().nonnegative() }),
]);
export type ClientFrame = z.infer<typeof ClientFrame>;

export const EnvelopeFrame = z.discriminatedUnion('ok', [
  z.object({ ok: z.literal(true), value: z.unknown() }),
  z.object({ ok: z.literal(false), error: ErrorInfo }),
]);

export const ServerFrame = z.discriminatedUnion('t', [
  z.object({ t: z.literal('result'), id: z.number().int(), envelope: EnvelopeFrame }),
  z.object({ t: z.literal('event'), event: z.string(), payload: z.unknown() }),
]);
export type ServerFrame = z.infer<typeof ServerFrame>;

/** Query parameter and cookie prefix carrying the host's session token. */
export const HOST_TOKEN_PARAM = 'token';
/** WebSocket path on the host. */
export const HOST_WS_PATH = '/api';
/**
 * Terminal output for the browser: a POST here answers with a stream of records for every
 * terminal, until either side closes. A record is one JSON line — a `TerminalChunk`
 * (contracts/terminals.ts), where a data chunk carries `bytes: N` instead of `data` — and, for a
 * data chunk, the N bytes of UTF-8 output right after the newline.
 */
export const HOST_TERMINAL_STREAM_PATH = '/api/terminal-stream';
/**
 * Query parameter that opens the terminal stream with flow control: its first record is
 * `{ kind: 'hello', stream, window }`, and the host sends at most `window` data bytes the page has
 * not acknowledged (an `ack` frame on the WebSocket). Output past that is skipped in the live
 * view (a `gap` record), never queued, so the page only receives what it can draw.
 */
export const HOST_TERMINAL_STREAM_ACK_PARAM = 'ack';
