import { readSse } from './sse';
import { compactHistory, parseArguments, postStreaming, UpstreamError, type CompactableResult, type ModelClient, type ModelToolCall, type ToolResultMessage, type ToolSpec, type TurnResult } from './model';

type Block =
  | { type: 'text'; text: string }
  | { type: 'tool_use'; id: string; name: string; input: unknown }
  // Extended thinking must go back to the API unchanged (with its signature) in the same turn.
  | { type: 'thinking'; thinking: string; signature: string }
  | { type: 'redacted_thinking'; data: string };
type Message = { role: 'user' | 'assistant'; content: string | unknown[] };

export interface AnthropicOptions {
  baseUrl: string;
  apiKey: string;
  model: string;
  maxTokens: number;
  system: string;
  tools: ToolSpec[];
  retries: number;
  /** Keep the history under this many characters (older tool outputs are elided). */
  contextChars: number;
}

/** Anthropic Messages API with tool use, streaming (SSE). */
export class AnthropicClient implements ModelClient {
  private readonly messages: Message[] = [];
  private readonly results: CompactableResult[] = [];

  /** `previous`: an earlier turn's history (a follow-up); the task is added as the next user message. */
  constructor(private readonly opts: AnthropicOptions, task: string, previous: Array<Record<string, unknown>> = []) {
    for (const m of previous as Message[]) {
      this.messages.push(m);
      // Earlier tool outputs can be elided like this turn's.
      if (m.role === 'user' && Array.isArray(m.content)) {
        for (const b of m.content as Array<{ type?: string; content?: unknown }>) {
          if (b?.type === 'tool_result' && typeof b.content === 'string') this.results.push({ get: () => b.content as string, set: (t) => (b.content = t) });
        }
      }
    }
    const last = this.messages.at(-1);
    // Roles alternate: a history that ends with tool results takes the task in the same message.
    if (last?.role === 'user') last.content = [...(typeof last.content === 'string' ? [{ type: 'text', text: last.content }] : last.content), { type: 'text', text: task }];
    else this.messages.push({ role: 'user', content: task });
  }

  history(): Array<Record<string, unknown>> {
    return this.messages;
  }

  async turn(onTextDelta: (delta: string) => void): Promise<TurnResult> {
    compactHistory(() => JSON.stringify(this.messages).length, this.results, this.opts.contextChars);
    const base = this.opts.baseUrl.endsWith('/v1') ? this.opts.baseUrl : `${this.opts.baseUrl}/v1`;
    const res = await postStreaming(
      `${base}/messages`,
      { 'x-api-key': this.opts.apiKey, 'anthropic-version': '2023-06-01' },
      {
        model: this.opts.model,
        max_tokens: this.opts.maxTokens,
        system: this.opts.system,
        messages: this.messages,
        tools: this.opts.tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.schema })),
        stream: true,
      },
      this.opts.retries,
    );
    const blocks: (Block & { json?: string })[] = [];
    let inputTokens = 0;
    let outputTokens = 0;
    let stopReason = '';
    let stopped = false;
    for await (const msg of readSse(res.body!)) {
      let ev: Record<string, any>;
      try {
        ev = JSON.parse(msg.data) as Record<string, any>;
      } catch {
        continue;
      }
      switch (ev.type) {
        case 'message_start': {
          const u = ev.message?.usage ?? {};
          inputTokens = (u.input_tokens ?? 0) + (u.cache_creation_input_tokens ?? 0) + (u.cache_read_input_tokens ?? 0);
          outputTokens = u.output_tokens ?? 0;
          break;
        }
        case 'content_block_start': {
          const b = ev.content_block ?? {};
          if (b.type === 'text') blocks[ev.index] = { type: 'text', text: b.text ?? '' };
          else if (b.type === 'tool_use') blocks[ev.index] = { type: 'tool_use', id: b.id, name: b.name, input: {}, json: '' };
          else if (b.type === 'thinking') blocks[ev.index] = { type: 'thinking', thinking: b.thinking ?? '', signature: b.signature ?? '' };
          else if (b.type === 'redacted_thinking') blocks[ev.index] = { type: 'redacted_thinking', data: b.data ?? '' };
          break;
        }
        case 'content_block_delta': {
          const b = blocks[ev.index];
          const d = ev.delta ?? {};
          if (b?.type === 'text' && d.type === 'text_delta') {
            b.text += d.text;
            onTextDelta(d.text);
          } else if (b?.type === 'tool_use' && d.type === 'input_json_delta') {
            b.json = (b.json ?? '') + (d.partial_json ?? '');
          } else if (b?.type === 'thinking' && d.type === 'thinking_delta') {
            b.thinking += d.thinking ?? '';
          } else if (b?.type === 'thinking' && d.type === 'signature_delta') {
            b.signature += d.signature ?? '';
          }
          break;
        }
        case 'message_delta':
          if (ev.delta?.stop_reason) stopReason = ev.delta.stop_reason;
          if (ev.usage?.output_tokens !== undefined) outputTokens = ev.usage.output_tokens;
          break;
        case 'message_stop':
          stopped = true;
          break;
        case 'error':
          throw new UpstreamError(`Model stream error: ${ev.error?.type ?? 'error'}: ${ev.error?.message ?? 'unknown'}`);
      }
    }
    if (!stopped) throw new UpstreamError('Model stream ended before message_stop (connection cut?)');
    const calls: ModelToolCall[] = [];
    const content: Block[] = [];
    for (const b of blocks) {
      if (!b) continue;
      if (b.type === 'text') {
        if (b.text) content.push({ type: 'text', text: b.text });
      } else if (b.type === 'thinking' || b.type === 'redacted_thinking') {
        content.push(b);
      } else {
        const parsed = parseArguments(b.json ?? '');
        // The history must carry an object even when the model sent broken JSON.
        const input = parsed.error ? {} : parsed.input;
        content.push({ type: 'tool_use', id: b.id, name: b.name, input });
        calls.push({ id: b.id, name: b.name, input: parsed.input, ...(parsed.error ? { inputError: parsed.error } : {}) });
      }
    }
    this.messages.push({ role: 'assistant', content: content.length > 0 ? content : [{ type: 'text', text: '(no content)' }] });
    const text = content.filter((b): b is Extract<Block, { type: 'text' }> => b.type === 'text').map((b) => b.text).join('');
    return { text, calls, usage: { inputTokens, outputTokens }, stopReason };
  }

  addToolResults(results: ToolResultMessage[]): void {
    const blocks = results.map((r) => ({ type: 'tool_result', tool_use_id: r.id, content: r.output || '(no output)', is_error: r.isError }));
    for (const b of blocks) this.results.push({ get: () => b.content, set: (t) => (b.content = t) });
    this.messages.push({ role: 'user', content: blocks });
  }

  /** Adds a plain user message (used to nudge the model). */
  addUser(text: string): void {
    this.messages.push({ role: 'user', content: text });
  }
}
