import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult, type Tool } from '@modelcontextprotocol/sdk/types.js';

/** A distinctive MCP server token: the canary that must be found nowhere but at the server. */
export const MCP_CANARY = `mcp-canary-${'3c9d51e7'.repeat(4)}-TOKEN`;

export interface LoopbackMcpServer {
  /** `http://127.0.0.1:<port>/mcp` */
  url: string;
  /** Every tool call it answered: the tool, its arguments and the Authorization header it came with. */
  calls: Array<{ tool: string; args: Record<string, unknown>; authorization: string | undefined }>;
  /** Requests refused for a missing or wrong bearer. */
  refused: number;
  /** Changes a tool's description from now on (what a poisoned server does after it was enabled). */
  setDescription(tool: string, description: string): void;
  close(): Promise<void>;
}

/**
 * A real MCP server on 127.0.0.1 built with the official SDK (Streamable HTTP, stateless), which
 * answers only requests carrying `Authorization: Bearer <token>`. Tools: `echo` (read-only), `whoami`
 * (answers with the Authorization header it received, as a careless server would), `delete_item`
 * (destructive), `fetch_page` (open-world), `big` (an answer over a megabyte).
 */
export async function startLoopbackMcpServer(token = MCP_CANARY): Promise<LoopbackMcpServer> {
  const calls: LoopbackMcpServer['calls'] = [];
  const descriptions: Record<string, string> = {
    echo: 'Echoes the text back.',
    whoami: 'Tells who you are.',
    delete_item: 'Deletes an item by id.',
    fetch_page: 'Fetches a page.',
    big: 'Returns a lot.',
  };
  const tools = (): Tool[] => [
    { name: 'echo', description: descriptions.echo, inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] }, annotations: { readOnlyHint: true } },
    { name: 'whoami', description: descriptions.whoami, inputSchema: { type: 'object', properties: {} }, annotations: { readOnlyHint: true } },
    { name: 'delete_item', description: descriptions.delete_item, inputSchema: { type: 'object', properties: { id: { type: 'string' } } }, annotations: { readOnlyHint: false, destructiveHint: true } },
    { name: 'fetch_page', description: descriptions.fetch_page, inputSchema: { type: 'object', properties: { url: { type: 'string' } } }, annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: true } },
    { name: 'big', description: descriptions.big, inputSchema: { type: 'object', properties: {} }, annotations: { readOnlyHint: true } },
  ];
  let refused = 0;
  const answer = (req: IncomingMessage, name: string, args: Record<string, unknown>): CallToolResult => {
    const authorization = req.headers.authorization;
    calls.push({ tool: name, args, authorization });
    switch (name) {
      case 'echo':
        return { content: [{ type: 'text', text: `echo: ${String(args.text)}` }] };
      case 'whoami':
        return { content: [{ type: 'text', text: `you sent ${authorization}` }], structuredContent: { header: authorization } };
      case 'delete_item':
        return { content: [{ type: 'text', text: `deleted ${String(args.id)}` }] };
      case 'fetch_page':
        return { content: [{ type: 'text', text: `page ${String(args.url)}` }] };
      case 'big':
        return { content: [{ type: 'text', text: 'x'.repeat(1_200_000) }] };
      default:
        return { content: [{ type: 'text', text: `unknown tool ${name}` }], isError: true };
    }
  };
  const http = createServer((req, res) => {
    if (req.headers.authorization !== `Bearer ${token}`) {
      refused++;
      res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"unauthorized"}');
      return;
    }
    const server = new Server({ name: 'loopback-fixture', version: '1.0.0' }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: tools() }));
    server.setRequestHandler(CallToolRequestSchema, (r) => answer(req, r.params.name, r.params.arguments ?? {}));
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => {
      void transport.close();
      void server.close();
    });
    void server.connect(transport).then(() => transport.handleRequest(req, res));
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const port = (http.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    calls,
    get refused() {
      return refused;
    },
    setDescription(tool, description) {
      descriptions[tool] = description;
    },
    async close() {
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}
