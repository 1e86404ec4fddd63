/**
 * Token counts seen in one upstream answer, each billed at its own rate: `inputTokens` is input
 * not served from the provider's prompt cache; cache reads and writes are counted apart.
 */
export interface CallUsage {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
}

/** A call with no usage (refused, failed or aborted). */
export function noUsage(): CallUsage {
  return { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 };
}

function num(v: unknown): number {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : 0;
}

function obj(v: unknown): Record<string, unknown> | undefined {
  return v && typeof v === 'object' ? (v as Record<string, unknown>) : undefined;
}

/**
 * Reads `usage` from any format. Anthropic reports uncached input, cache reads
 * (`cache_read_input_tokens`) and cache writes (`cache_creation_input_tokens`) apart; OpenAI Chat
 * (`prompt_tokens`) and Responses (`input_tokens`) include cached input in the total and name it in
 * `*_tokens_details.cached_tokens`.
 */
export function usageFromObject(usage: unknown, into: CallUsage): void {
  const u = obj(usage);
  if (!u) return;
  const openAiCached = num(obj(u.input_tokens_details)?.cached_tokens) || num(obj(u.prompt_tokens_details)?.cached_tokens);
  if ('prompt_tokens' in u || 'completion_tokens' in u) {
    into.inputTokens = Math.max(0, num(u.prompt_tokens) - openAiCached);
    into.cacheReadTokens = Math.min(openAiCached, num(u.prompt_tokens));
    into.outputTokens = num(u.completion_tokens);
  } else if ('input_tokens_details' in u) {
    // Responses API: input_tokens includes the cached part.
    into.inputTokens = Math.max(0, num(u.input_tokens) - openAiCached);
    into.cacheReadTokens = Math.min(openAiCached, num(u.input_tokens));
    if ('output_tokens' in u) into.outputTokens = num(u.output_tokens);
  } else if ('input_tokens' in u || 'output_tokens' in u || 'cache_read_input_tokens' in u || 'cache_creation_input_tokens' in u) {
    // Anthropic: message_start carries the input counts, message_delta the (cumulative) output;
    // a later event without input counts does not erase them.
    if ('input_tokens' in u || 'cache_read_input_tokens' in u || 'cache_creation_input_tokens' in u) {
      const input = num(u.input_tokens);
      const read = num(u.cache_read_input_tokens);
      const write = num(u.cache_creation_input_tokens);
      if (input + read + write > 0) {
        into.inputTokens = input;
        into.cacheReadTokens = read;
        into.cacheWriteTokens = write;
      }
    }
    if ('output_tokens' in u) into.outputTokens = num(u.output_tokens);
  }
}

/** Usage from a complete JSON answer (non-streaming). */
export function usageFromJson(text: string): CallUsage {
  const out = noUsage();
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
  readonly usage: CallUsage = noUsage();
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
