import { readSse } from './sse';
import { compactHistory, parseArguments, postStreaming, UpstreamError, type CompactableResult, type ModelClient, type ModelToolCall, type ToolResultMessage, type ToolSpec, type TurnResult } from './model';

export interface OpenAiOptions {
  baseUrl: string;
  apiKey: string;
  model: string;
  system: string;
  tools: ToolSpec[];
  retries: number;
  /** Keep the history under this many characters (older tool outputs are elided). */
  contextChars: number;
}

type ChatMessage = Record<string, unknown>;

/** OpenAI Chat Completions with tools, streaming; works with OpenAI-compatible servers (Ollama, llama.cpp, vLLM…). */
export class OpenAiClient implements ModelClient {
  private readonly messages: ChatMessage[] = [];
  private readonly results: CompactableResult[] = [];
  /** Some OpenAI-compatible servers reject stream_options; then it is left out from there on. */
  private streamOptions = true;

  /** `previous`: an earlier turn's history (a follow-up, system message first); the task is added as the next user message. */
  constructor(private readonly opts: OpenAiOptions, task: string, previous: ChatMessage[] = []) {
    if (previous.length) {
      for (const m of previous) {
        this.messages.push(m);
        if (m.role === 'tool' && typeof m.content === 'string') this.results.push({ get: () => m.content as string, set: (t) => (m.content = t) });
      }
    } else {
      this.messages.push({ role: 'system', content: opts.system });
    }
    this.messages.push({ role: 'user', content: task });
  }

  history(): ChatMessage[] {
    return this.messages;
  }

  async turn(onTextDelta: (delta: string) => void): Promise<TurnResult> {
    const headers: Record<string, string> = {};
    // Local servers may need no key at all.
    if (this.opts.apiKey) headers.authorization = `Bearer ${this.opts.apiKey}`;
    compactHistory(() => JSON.stringify(this.messages).length, this.results, this.opts.contextChars);
    const body = () => ({
      model: this.opts.model,
      messages: this.messages,
      tools: this.opts.tools.map((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.schema } })),
      stream: true,
      ...(this.streamOptions ? { stream_options: { include_usage: true } } : {}),
    });
    let res: Response;
    try {
      res = await postStreaming(`${this.opts.baseUrl}/chat/completions`, headers, body(), this.opts.retries);
    } catch (err) {
      if (!(err instanceof UpstreamError) || err.status !== 400 || !this.streamOptions || !/stream_options/i.test(err.message)) throw err;
      this.streamOptions = false;
      res = await postStreaming(`${this.opts.baseUrl}/chat/completions`, headers, body(), this.opts.retries);
    }
    let text = '';
    const calls: { id: string; name: string; args: string }[] = [];
    let inputTokens = 0;
    let outputTokens = 0;
    let stopReason = '';
    let done = false;
    for await (const msg of readSse(res.body!)) {
      if (msg.data === '[DONE]') {
        done = true;
        break;
      }
      let chunk: Record<string, any>;
      try {
        chunk = JSON.parse(msg.data) as Record<string, any>;
      } catch {
        continue;
      }
      if (chunk.error) throw new UpstreamError(`Model stream error: ${chunk.error.message ?? JSON.stringify(chunk.error)}`);
      if (chunk.usage) {
        inputTokens = chunk.usage.prompt_tokens ?? inputTokens;
        outputTokens = chunk.usage.completion_tokens ?? outputTokens;
      }
      const choice = chunk.choices?.[0];
      if (!choice) continue;
      const delta = choice.delta ?? {};
      if (typeof delta.content === 'string' && delta.content) {
        text += delta.content;
        onTextDelta(delta.content);
      }
      for (const tc of (delta.tool_calls ?? []) as Record<string, any>[]) {
        const i = typeof tc.index === 'number' ? tc.index : calls.length;
        const call = (calls[i] ??= { id: '', name: '', args: '' });
        if (tc.id) call.id = tc.id;
        if (tc.function?.name) call.name += tc.function.name;
        if (tc.function?.arguments) call.args += tc.function.arguments;
      }
      if (choice.finish_reason) {
        stopReason = choice.finish_reason;
        // Some servers send no [DONE]; the finish_reason plus end of body is enough.
        done = true;
      }
    }
    if (!done) throw new UpstreamError('Model stream ended before it finished (connection cut?)');
    const modelCalls: ModelToolCall[] = [];
    const wireCalls: unknown[] = [];
    calls.forEach((c, i) => {
      if (!c) return;
      const id = c.id || `call_${i}_${Date.now().toString(36)}`;
      const parsed = parseArguments(c.args);
      modelCalls.push({ id, name: c.name, input: parsed.input, ...(parsed.error ? { inputError: parsed.error } : {}) });
      wireCalls.push({ id, type: 'function', function: { name: c.name, arguments: c.args || '{}' } });
    });
    const assistant: ChatMessage = { role: 'assistant', content: text || null };
    if (wireCalls.length > 0) assistant.tool_calls = wireCalls;
    this.messages.push(assistant);
    return { text, calls: modelCalls, usage: { inputTokens, outputTokens }, stopReason };
  }

  addToolResults(results: ToolResultMessage[]): void {
    for (const r of results) {
      const message: ChatMessage = { role: 'tool', tool_call_id: r.id, content: r.output || '(no output)' };
      this.results.push({ get: () => message.content as string, set: (t) => (message.content = t) });
      this.messages.push(message);
    }
  }

  addUser(text: string): void {
    this.messages.push({ role: 'user', content: text });
  }
}
