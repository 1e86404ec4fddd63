import { redact } from './events';

/** A tool as offered to the model. */
export interface ToolSpec {
  name: string;
  description: string;
  /** JSON Schema of the tool's input object. */
  schema: Record<string, unknown>;
}

/** A tool call the model made. `inputError` is set when its arguments were not valid JSON. */
export interface ModelToolCall {
  id: string;
  name: string;
  input: unknown;
  inputError?: string;
}

export interface TurnResult {
  text: string;
  calls: ModelToolCall[];
  usage: { inputTokens: number; outputTokens: number };
  stopReason: string;
}

export interface ToolResultMessage {
  id: string;
  output: string;
  isError: boolean;
}

/** One provider's conversation: keeps its own wire-format history. */
export interface ModelClient {
  /** Calls the model with the history so far and appends its answer to the history. */
  turn(onTextDelta: (delta: string) => void): Promise<TurnResult>;
  /** Appends the results of the last turn's tool calls. */
  addToolResults(results: ToolResultMessage[]): void;
  /** The history in the provider's wire format (the transcript a follow-up turn continues). */
  history(): Array<Record<string, unknown>>;
}

/** The provider answered with an error, or could not be reached. Messages never hold the key. */
export class UpstreamError extends Error {
  constructor(message: string, readonly status?: number) {
    super(message);
  }
}

const RETRYABLE = new Set([408, 409, 429, 500, 502, 503, 504, 529]);

function explain(status: number): string {
  if (status === 401) return 'authentication failed'; // the proxy's run-token refusal and a provider's key refusal both say which in the message
  if (status === 403) return 'forbidden';
  if (status === 404) return 'not found (check the model name and base URL)';
  if (status === 429) return 'rate limited or out of budget';
  if (status === 529) return 'provider overloaded';
  if (status >= 500) return 'provider error';
  return 'request rejected';
}

async function errorMessage(res: Response): Promise<string> {
  const text = await res.text().catch(() => '');
  try {
    const body = JSON.parse(text) as { error?: { message?: string } | string; message?: string };
    const m = typeof body.error === 'string' ? body.error : body.error?.message ?? body.message;
    if (m) return m;
  } catch {
    // not JSON
  }
  return text.slice(0, 300);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** POSTs a streaming request; retries 429/5xx with backoff (Retry-After honoured, capped). */
export async function postStreaming(url: string, headers: Record<string, string>, body: unknown, retries: number): Promise<Response> {
  for (let attempt = 0; ; attempt++) {
    let res: Response;
    try {
      res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...headers }, body: JSON.stringify(body) });
    } catch (err) {
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      const detail = cause?.code ?? cause?.message ?? (err as Error).message;
      if (attempt < retries) {
        await sleep(1000 * 2 ** attempt);
        continue;
      }
      throw new UpstreamError(redact(`Cannot reach the model at ${new URL(url).origin}: ${detail}`));
    }
    if (res.ok && res.body) return res;
    if (RETRYABLE.has(res.status) && attempt < retries) {
      const after = Number(res.headers.get('retry-after'));
      await res.body?.cancel().catch(() => undefined);
      await sleep(Number.isFinite(after) && after > 0 ? Math.min(after, 20) * 1000 : 1000 * 2 ** attempt);
      continue;
    }
    const message = await errorMessage(res);
    throw new UpstreamError(redact(`Model request failed: HTTP ${res.status}, ${explain(res.status)}${message ? `: ${message}` : ''}`), res.status);
  }
}

/** Parses a tool call's JSON arguments; an empty string means no arguments. */
export function parseArguments(raw: string): { input: unknown; error?: string } {
  if (raw.trim() === '') return { input: {} };
  try {
    return { input: JSON.parse(raw) as unknown };
  } catch (err) {
    return { input: raw, error: `the tool arguments were not valid JSON (${(err as Error).message})` };
  }
}

/** A tool result as stored in a provider's history, whose text can be replaced. */
export interface CompactableResult {
  get(): string;
  set(text: string): void;
}

/**
 * Keeps a conversation under `limitChars` (a rough stand-in for the context window) by replacing
 * the oldest tool outputs with a short note; the newest `keepLast` results are never touched.
 */
export function compactHistory(totalChars: () => number, results: CompactableResult[], limitChars: number, keepLast = 4): void {
  if (totalChars() <= limitChars) return;
  for (const r of results.slice(0, Math.max(0, results.length - keepLast))) {
    const text = r.get();
    if (text.length <= 200 || text.startsWith('[elided')) continue;
    r.set(`[elided to save context: ${text.length} characters of tool output; run the tool again if you need it]`);
    if (totalChars() <= limitChars) return;
  }
}
