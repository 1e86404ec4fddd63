import type { ToolSpec } from './model';
import { readSse } from './sse';

/**
 * A minimal MCP client (Streamable HTTP, protocol 2025-06-18) for the run's MCP gateway
 * (docs/architecture.md §20 "Agents"): the agent is bundled without dependencies, so it speaks the few
 * JSON-RPC requests it needs itself — initialize, tools/list, tools/call. The gateway answers with
 * JSON or an SSE stream; both are read. The token goes only into the Authorization header.
 */

const PROTOCOL_VERSION = '2025-06-18';
/** Characters of a tool's answer handed to the model (the gateway already caps answers at 1 MiB). */
const ANSWER_CAP = 100_000;
/** Pages of tools/list read at most (the gateway sends one page). */
const MAX_PAGES = 20;

export interface McpToolOutcome {
  ok: boolean;
  output: string;
}

export class McpError extends Error {}

export class McpGatewayClient {
  private sessionId: string | undefined;
  private nextId = 1;
  /** The gateway's tool names (`<server>__<tool>`), offered to the model as they are. */
  private readonly names = new Set<string>();

  constructor(private readonly url: string, private readonly token: string) {}

  /** Opens a session and lists the gateway's tools as the model sees them. */
  async connect(): Promise<ToolSpec[]> {
    await this.request('initialize', { protocolVersion: PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'airlock-builtin-agent', version: '1' } });
    await this.notify('notifications/initialized');
    const tools: ToolSpec[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < MAX_PAGES; page++) {
      const result = (await this.request('tools/list', cursor ? { cursor } : {})) as { tools?: unknown; nextCursor?: unknown };
      for (const t of Array.isArray(result.tools) ? result.tools : []) {
        const tool = t as { name?: unknown; description?: unknown; inputSchema?: unknown };
        if (typeof tool.name !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(tool.name)) continue;
        const schema = tool.inputSchema && typeof tool.inputSchema === 'object' && !Array.isArray(tool.inputSchema) ? (tool.inputSchema as Record<string, unknown>) : { type: 'object' };
        this.names.add(tool.name);
        tools.push({ name: tool.name, description: `[MCP tool, through Airlock's gateway] ${typeof tool.description === 'string' ? tool.description : ''}`.trim(), schema: { type: 'object', ...schema } });
      }
      cursor = typeof result.nextCursor === 'string' && result.nextCursor ? result.nextCursor : undefined;
      if (!cursor) break;
    }
    return tools;
  }

  has(name: string): boolean {
    return this.names.has(name);
  }

  /** Calls a tool; a refusal by the gateway's policy or the server's error is a failed outcome, not a throw. */
  async call(name: string, input: unknown): Promise<McpToolOutcome> {
    const args = input && typeof input === 'object' && !Array.isArray(input) ? input : {};
    let result: { content?: unknown; structuredContent?: unknown; isError?: unknown };
    try {
      result = (await this.request('tools/call', { name, arguments: args })) as typeof result;
    } catch (err) {
      return { ok: false, output: `error: ${(err as Error).message}` };
    }
    const parts: string[] = [];
    for (const c of Array.isArray(result.content) ? result.content : []) {
      const item = c as { type?: unknown; text?: unknown; mimeType?: unknown };
      if (item.type === 'text' && typeof item.text === 'string') parts.push(item.text);
      else parts.push(`[${String(item.type)} content${typeof item.mimeType === 'string' ? ` (${item.mimeType})` : ''}]`);
    }
    if (parts.length === 0 && result.structuredContent !== undefined) parts.push(JSON.stringify(result.structuredContent));
    const text = parts.join('\n');
    return { ok: result.isError !== true, output: text.length > ANSWER_CAP ? `${text.slice(0, ANSWER_CAP)}\n… [cut: ${text.length - ANSWER_CAP} more characters]` : text };
  }

  /** Ends the session (best effort: the gateway ends it with the run anyway). */
  async close(): Promise<void> {
    if (!this.sessionId) return;
    await fetch(this.url, { method: 'DELETE', headers: this.headers() }).then((r) => r.body?.cancel()).catch(() => undefined);
  }

  private headers(): Record<string, string> {
    return {
      authorization: `Bearer ${this.token}`,
      accept: 'application/json, text/event-stream',
      'content-type': 'application/json',
      'mcp-protocol-version': PROTOCOL_VERSION,
      ...(this.sessionId ? { 'mcp-session-id': this.sessionId } : {}),
    };
  }

  private async notify(method: string): Promise<void> {
    const res = await fetch(this.url, { method: 'POST', headers: this.headers(), body: JSON.stringify({ jsonrpc: '2.0', method }) });
    await res.body?.cancel();
    if (!res.ok) throw new McpError(`MCP gateway refused ${method}: HTTP ${res.status}`);
  }

  private async request(method: string, params: Record<string, unknown>): Promise<unknown> {
    const id = this.nextId++;
    let res: Response;
    try {
      res = await fetch(this.url, { method: 'POST', headers: this.headers(), body: JSON.stringify({ jsonrpc: '2.0', id, method, params }) });
    } catch (err) {
      throw new McpError(`cannot reach Airlock's MCP gateway: ${(err as { cause?: { code?: string } }).cause?.code ?? (err as Error).message}`);
    }
    if (!res.ok || !res.body) {
      const text = await res.text().catch(() => '');
      let message = text.slice(0, 300);
      try {
        message = (JSON.parse(text) as { error?: { message?: string } }).error?.message ?? message;
      } catch {
        // not JSON: the text as it is
      }
      throw new McpError(`MCP gateway answered ${method} with HTTP ${res.status}${message ? `: ${message}` : ''}`);
    }
    const session = res.headers.get('mcp-session-id');
    if (session) this.sessionId = session;
    const answer = (res.headers.get('content-type') ?? '').includes('text/event-stream') ? await this.fromSse(res.body, id) : ((await res.json()) as unknown);
    const message = answer as { id?: unknown; result?: unknown; error?: { message?: unknown } } | undefined;
    if (!message || message.id !== id) throw new McpError(`MCP gateway sent no answer to ${method}`);
    if (message.error) throw new McpError(`${method} failed: ${typeof message.error.message === 'string' ? message.error.message : 'error'}`);
    return message.result ?? {};
  }

  /** The JSON-RPC answer with this id in an SSE stream (notifications before it are skipped). */
  private async fromSse(body: ReadableStream<Uint8Array>, id: number): Promise<unknown> {
    for await (const msg of readSse(body)) {
      if (msg.event !== 'message') continue;
      let parsed: { id?: unknown } | undefined;
      try {
        parsed = JSON.parse(msg.data) as { id?: unknown };
      } catch {
        continue;
      }
      // The gateway ends the stream after the answer: nothing is left to read.
      if (parsed?.id === id) return parsed;
    }
    return undefined;
  }
}
