/** Token counts seen in one upstream answer. */
export interface CallUsage {
  inputTokens: number;
  outputTokens: number;
}

function num(v: unknown): number {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : 0;
}

function obj(v: unknown): Record<string, unknown> | undefined {
  return v && typeof v === 'object' ? (v as Record<string, unknown>) : undefined;
}

/** Reads `usage` from either format: Anthropic (input/output_tokens + cache), OpenAI chat/embeddings, Responses. */
export function usageFromObject(usage: unknown, into: CallUsage): void {
  const u = obj(usage);
  if (!u) return;
  if ('input_tokens' in u || 'output_tokens' in u || 'cache_read_input_tokens' in u) {
    const input = num(u.input_tokens) + num(u.cache_read_input_tokens) + num(u.cache_creation_input_tokens);
    if (input > 0) into.inputTokens = input;
    if ('output_tokens' in u) into.outputTokens = num(u.output_tokens);
  } else if ('prompt_tokens' in u || 'completion_tokens' in u) {
    into.inputTokens = num(u.prompt_tokens);
    into.outputTokens = num(u.completion_tokens);
  }
}

/** Usage from a complete JSON answer (non-streaming). */
export function usageFromJson(text: string): CallUsage {
  const out: CallUsage = { inputTokens: 0, outputTokens: 0 };
  try {
    usageFromObject(obj(JSON.parse(text))?.usage, out);
  } catch {
    // Not JSON (or truncated): no usage to report.
  }
  return out;
}

/**
 * Scans an SSE stream as it passes, without holding it: only `data:` lines that mention "usage"
 * are parsed. Anthropic: message_start (input) + message_delta (cumulative output); OpenAI chat:
 * the final usage chunk; Responses: response.completed.
 */
export class SseUsageScanner {
  readonly usage: CallUsage = { inputTokens: 0, outputTokens: 0 };
  private partial = '';

  push(chunk: Buffer): void {
    const text = this.partial + chunk.toString('utf8');
    const lastNl = text.lastIndexOf('\n');
    if (lastNl < 0) {
      this.partial = text.length > 1 << 20 ? '' : text;
      return;
    }
    this.partial = text.slice(lastNl + 1);
    if (this.partial.length > 1 << 20) this.partial = '';
    if (text.indexOf('usage') < 0) return;
    for (const line of text.slice(0, lastNl).split('\n')) {
      if (!line.startsWith('data:') || line.indexOf('usage') < 0) continue;
      this.line(line.slice(5).trim());
    }
  }

  private line(data: string): void {
    let event: Record<string, unknown> | undefined;
    try {
      event = obj(JSON.parse(data));
    } catch {
      return;
    }
    if (!event) return;
    const message = obj(event.message);
    const response = obj(event.response);
    if (message?.usage) usageFromObject(message.usage, this.usage);
    else if (response?.usage) usageFromObject(response.usage, this.usage);
    else if (event.usage) usageFromObject(event.usage, this.usage);
  }
}
