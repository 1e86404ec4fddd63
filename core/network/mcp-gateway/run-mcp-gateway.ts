import { createHash, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http';
import { connect as netConnect, type AddressInfo, type Socket } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { AirlockError } from '../../../contracts/errors';
import { APP_VERSION } from '../../common/app-version';
import { Emitter, type Disposable, type Event } from '../../common/disposable';
import { debugLog } from '../../common/debug-log';
import { RunTokenRegistry, presentedToken } from '../../proxy/run-tokens';
import { secretForms } from '../gateway/secret-scrub';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { serverOrigin, type ResolvedMcpServer } from './mcp-server-registry';

/**
 * A run's MCP gateway (docs/architecture.md §20): one Streamable HTTP endpoint on the host's loopback,
 * reached from the sandbox only through the channel, under a token minted for the run. Behind it the
 * gateway holds one SDK client per server the user enabled for the run, each with its credential
 * from the keychain; the sandbox sees the servers' tools (prefixed `<server>__`) and their answers,
 * scrubbed of every credential, never a credential itself.
 */

/** The path the sandbox is given: `http://127.0.0.1:<port>/mcp`. */
export const GATEWAY_PATH = '/mcp';
/** Separates the server's name from its tool's in the names the sandbox sees. */
export const TOOL_SEPARATOR = '__';
/** What stands where a credential was in anything the gateway sends into the sandbox. */
export const SCRUBBED = '[airlock: credential removed]';
/** Largest answer (JSON) a call passes into the sandbox; a larger one becomes a tool error. */
export const MAX_RESULT_BYTES = 1024 * 1024;
/** Largest JSON-RPC request the sandbox may send. */
const MAX_REQUEST_BYTES = 4 * 1024 * 1024;
/** Sessions the sandbox may hold open at once (an agent needs one or two). */
const MAX_SESSIONS = 16;
/** Tools one server may offer the run (a longer list is cut, and the record says so). */
const MAX_TOOLS_PER_SERVER = 200;
/** How long the gateway waits for a server to connect and for one call to answer. */
const CONNECT_TIMEOUT_MS = 30_000;
const CALL_TIMEOUT_MS = 10 * 60_000;
/** A tool name the Anthropic and OpenAI APIs both take, with the server's prefix. */
const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** What the policy decides for one call. */
export type McpDecision = 'allow' | 'deny';

/** One tool the gateway serves, as the host knows it (from the server, through the host's SDK client). */
export interface GatewayTool {
  server: string;
  /** The tool's name at its server. */
  tool: string;
  /** The name the sandbox sees: `<server>__<tool>`. */
  name: string;
  /** SHA-256 of the tool's description, input schema and annotations, as the server gave them. */
  descriptionHash: string;
  annotations: { readOnlyHint?: boolean; destructiveHint?: boolean; openWorldHint?: boolean };
  /** The definition as served (scrubbed). */
  definition: Tool;
}

/** A finished call, for the run's audit and live view. Arguments and results are digests and sizes only. */
export interface McpCallEvent {
  server: string;
  tool: string;
  /** SHA-256 of the arguments' JSON as the sandbox sent them. */
  argsSha256: string;
  argsBytes: number;
  decision: McpDecision;
  /** Who decided: `policy` (the tool's rule), `user` (an answer to a question), `timeout`. */
  by?: string;
  /** Why it was refused or failed (no arguments, no result text). */
  reason?: string;
  /** Bytes of the answer passed into the sandbox (after scrubbing and the cap). */
  resultBytes: number;
  /** The answer was a tool error (the server's, the policy's or the cap's). */
  isError: boolean;
  /** The answer was over MAX_RESULT_BYTES and replaced by an error. */
  capped?: true;
  durationMs: number;
}

/**
 * Decides a call before it is forwarded (the run's per-tool policy, mcp-tool-policy.ts); absent: every
 * call is allowed. It may wait (a question to the user); `signal` aborts when the caller went away.
 * `args` is the sandbox's (attacker-written) arguments, for showing to the user only.
 */
export type McpCallPolicy = (tool: GatewayTool, call: { argsSha256: string; args: Record<string, unknown>; signal?: AbortSignal }) => Promise<{ decision: McpDecision; by?: string; reason?: string }>;

export interface RunMcpGateway extends Disposable {
  /** The run token the sandbox presents (`Authorization: Bearer`). Never log it. */
  readonly token: string;
  /** The gateway's port on the host's loopback. */
  readonly port: number;
  readonly tools: readonly GatewayTool[];
  /** What the run records: each server, where it is, how many tools it serves, what was left out. */
  readonly record: { servers: Array<{ name: string; origin: string; transport: 'http' | 'sse' | 'stdio'; tools: number; skipped?: string[]; changed?: string[]; unpinned?: string[]; denied?: string[] }> };
  readonly onDidCall: Event<McpCallEvent>;
  /** The run's questions about calls (when the policy can ask), as given to `openRunMcpGateway`. */
  readonly questions?: McpQuestionsPort;
  /** A new connection to the gateway, for the channel (`exposeHostService`). */
  connect(): Socket;
}

/** What the run needs of the policy's questions (mcp-tool-policy.ts `McpApprovals`): events to show and record, and the answer. */
export interface McpQuestionsPort extends Disposable {
  readonly onDidAsk: Event<McpQuestion>;
  readonly onDidResolve: Event<{ id: string; answer: McpAnswer; by: 'user' | 'timeout' | 'closed'; question: McpQuestion }>;
  answer(id: string, answer: McpAnswer): boolean;
}

/** `once`: this call. `run`: this tool for the rest of the run. `deny`: refuse this call. */
export type McpAnswer = 'once' | 'run' | 'deny';

/** A call waiting for the user. Host-made, except `args` (the agent's, cleaned and bounded: show as such). */
export interface McpQuestion {
  id: string;
  server: string;
  tool: string;
  /** `policy`: the tool's rule is ask. `changed`: its description is not the one pinned. `new`: no pin for it. */
  why: 'policy' | 'changed' | 'new';
  /** The tool's description as the server gives it now (scrubbed, cleaned, bounded), for `changed` and `new`. */
  description?: string;
  /** The call's arguments as JSON (cleaned, bounded). */
  args: string;
  answers: McpAnswer[];
  /** ISO time the call stops waiting (then it is refused). */
  expiresAt: string;
}

interface Upstream {
  name: string;
  client: Client;
  /** A stdio server's sidecar, removed with the gateway. */
  sidecar?: { dispose(): Promise<void> };
}

/**
 * Starts a stdio server's sidecar and hands back its stdio transport (stdio-sidecar.ts); given by the
 * composition root, which knows the engine. Absent: stdio servers are refused.
 */
export type StdioOpener = (server: ResolvedMcpServer) => Promise<{ transport: Transport; dispose(): Promise<void> }>;

/** Replaces every encoded form of every credential in `text`. */
export function scrubText(text: string, forms: readonly string[]): string {
  let out = text;
  for (const f of forms) if (out.includes(f)) out = out.split(f).join(SCRUBBED);
  return out;
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** Every encoded form of every secret of the servers (credentials, OAuth tokens, stdio servers' secret environment), longest first. */
function credentialForms(servers: readonly ResolvedMcpServer[]): string[] {
  const forms: string[] = [];
  addForms(
    forms,
    servers.flatMap((s) => [...(s.credential ? [s.credential.reveal()] : []), ...Object.values(s.secretEnv ?? {}).map((v) => v.reveal()), ...(s.oauth?.secretValues() ?? [])]),
  );
  return forms;
}

function addForms(forms: string[], values: readonly string[]): void {
  for (const f of values.flatMap((v) => [...secretForms(v)])) if (!forms.includes(f)) forms.push(f);
  forms.sort((a, b) => b.length - a.length);
}

/** The headers a server's credential travels in. */
function authHeaders(server: ResolvedMcpServer): Record<string, string> {
  const auth = server.entry.auth;
  const value = server.credential?.reveal();
  if (auth.type === 'none' || auth.type === 'oauth' || value === undefined) return {};
  return auth.type === 'bearer' ? { Authorization: `Bearer ${value}` } : { [auth.name]: value };
}

async function connectUpstream(server: ResolvedMcpServer, forms: readonly string[], stdio?: StdioOpener): Promise<Upstream> {
  if (server.entry.transport === 'stdio') return connectStdio(server, forms, stdio);
  const url = new URL(server.entry.url ?? '');
  // An OAuth server gets its tokens from the session, which the SDK refreshes on the host.
  const options = { requestInit: { headers: authHeaders(server) }, ...(server.oauth ? { authProvider: server.oauth } : {}) };
  const transport = server.entry.transport === 'sse' ? new SSEClientTransport(url, options) : new StreamableHTTPClientTransport(url, options);
  const client = new Client({ name: 'airlock-mcp-gateway', version: APP_VERSION }, { capabilities: {} });
  try {
    await client.connect(transport, { timeout: CONNECT_TIMEOUT_MS });
  } catch (err) {
    await client.close().catch(debugLog.swallow('mcpGateway.connect.close'));
    // The server's words may echo what it was sent: scrubbed before they reach a record or a screen.
    const why = scrubText((err as Error).message ?? String(err), forms).slice(0, 300);
    throw new AirlockError('UPSTREAM_ERROR', `MCP server "${server.entry.name}" (${url.origin}) could not be reached: ${why}. Check the server (\`airlock mcp-servers list\`) or start the run without --mcp ${server.entry.name}.`, { field: 'mcpServers' });
  }
  return { name: server.entry.name, client };
}

async function connectStdio(server: ResolvedMcpServer, forms: readonly string[], stdio?: StdioOpener): Promise<Upstream> {
  if (!stdio) throw new AirlockError('INVALID_INPUT', `MCP server "${server.entry.name}" is a local (stdio) server; it runs only in a sidecar container beside a container sandbox (--isolation container or gvisor).`, { field: 'mcpServers' });
  const sidecar = await stdio(server);
  const client = new Client({ name: 'airlock-mcp-gateway', version: APP_VERSION }, { capabilities: {} });
  try {
    await client.connect(sidecar.transport, { timeout: CONNECT_TIMEOUT_MS });
  } catch (err) {
    await client.close().catch(debugLog.swallow('mcpGateway.connect.close'));
    await sidecar.dispose();
    const why = scrubText((err as Error).message ?? String(err), forms).slice(0, 300);
    throw new AirlockError('UPSTREAM_ERROR', `MCP server "${server.entry.name}" (stdio, in its sidecar) did not answer: ${why}. Check its command (\`airlock mcp-servers list\`) or start the run without --mcp ${server.entry.name}.`, { field: 'mcpServers' });
  }
  return { name: server.entry.name, client, sidecar };
}

async function listAll(up: Upstream): Promise<{ tools: Tool[]; cut: boolean }> {
  const tools: Tool[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 50; page++) {
    const res = await up.client.listTools(cursor ? { cursor } : {}, { timeout: CONNECT_TIMEOUT_MS });
    tools.push(...res.tools);
    if (tools.length > MAX_TOOLS_PER_SERVER) return { tools: tools.slice(0, MAX_TOOLS_PER_SERVER), cut: true };
    cursor = res.nextCursor;
    if (!cursor) break;
  }
  return { tools, cut: false };
}

/** The hash a description is pinned by: what the model reads about the tool and what it may send. */
export function toolDescriptionHash(tool: Pick<Tool, 'description' | 'inputSchema' | 'annotations' | 'title'>): string {
  return sha256(JSON.stringify([tool.title ?? null, tool.description ?? null, tool.inputSchema ?? null, tool.annotations ?? null]));
}

/** A server's tools as the host sees them now: what `airlock mcp-servers add|pin` shows and pins. */
export interface ListedTool {
  tool: string;
  descriptionHash: string;
  /** Scrubbed of the server's credential; still the server's words. */
  description: string;
  annotations: GatewayTool['annotations'];
}

/** Connects to one server with its credential, lists its tools and disconnects (pinning, docs/architecture.md §20). */
export async function listServerTools(server: ResolvedMcpServer, stdio?: StdioOpener): Promise<{ tools: ListedTool[]; cut: boolean }> {
  const forms = credentialForms([server]);
  const up = await connectUpstream(server, forms, stdio);
  try {
    const { tools, cut } = await listAll(up);
    return { tools: tools.map((t) => ({ tool: t.name, descriptionHash: toolDescriptionHash(t), description: scrubText(t.description ?? '', forms), annotations: hints(t) })), cut };
  } finally {
    await up.client.close().catch(debugLog.swallow('mcpGateway.listTools.close'));
    await up.sidecar?.dispose();
  }
}

function hints(t: Tool): GatewayTool['annotations'] {
  const a = t.annotations ?? {};
  return { ...(a.readOnlyHint !== undefined ? { readOnlyHint: a.readOnlyHint } : {}), ...(a.destructiveHint !== undefined ? { destructiveHint: a.destructiveHint } : {}), ...(a.openWorldHint !== undefined ? { openWorldHint: a.openWorldHint } : {}) };
}

function errorResult(text: string): CallToolResult {
  return { content: [{ type: 'text', text }], isError: true };
}

/** What `openRunMcpGateway` is given. */
export interface RunMcpGatewayOptions {
  runId: string;
  servers: ResolvedMcpServer[];
  policy?: McpCallPolicy;
  /** Tools left out of the listing (their rule is deny); a call to one still reaches the policy (and is refused, audited). */
  hide?: (tool: GatewayTool) => boolean;
  questions?: McpQuestionsPort;
  /** Starts a stdio server's sidecar (absent: stdio servers are refused). */
  stdio?: StdioOpener;
}

/**
 * Connects to the run's servers (each with its credential), lists their tools and starts the gateway
 * on 127.0.0.1. A server that cannot be reached fails the whole gateway: a run asked for it by name.
 */
export async function openRunMcpGateway(opts: RunMcpGatewayOptions): Promise<RunMcpGateway> {
  // Every encoded form of every credential: what must never pass into the sandbox. A refreshed
  // OAuth token joins the list in place, before the call that used it answers.
  const forms = credentialForms(opts.servers);
  const refreshes = opts.servers.flatMap((s) => (s.oauth ? [s.oauth.onDidSaveTokens((values) => addForms(forms, values))] : []));
  const upstreams: Upstream[] = [];
  const closeUpstreams = () => {
    for (const r of refreshes) r.dispose();
    return Promise.all(
      upstreams.map(async (u) => {
        await u.client.close().catch(debugLog.swallow('mcp-gateway.close-upstream'));
        await u.sidecar?.dispose().catch(debugLog.swallow('mcp-gateway.remove-sidecar'));
      }),
    );
  };
  const tools: GatewayTool[] = [];
  const record: RunMcpGateway['record'] = { servers: [] };
  try {
    for (const server of opts.servers) {
      const up = await connectUpstream(server, forms, opts.stdio);
      upstreams.push(up);
      record.servers.push(await serveToolsOf(server, up, forms, tools));
    }
  } catch (err) {
    await closeUpstreams();
    throw err;
  }

  const calls = new Emitter<McpCallEvent>();
  const callTool = toolCaller({ tools, upstreams, forms, calls, ...(opts.policy ? { policy: opts.policy } : {}) });
  const listed = tools.filter((t) => !opts.hide?.(t)).map((t) => t.definition);
  const tokens = new RunTokenRegistry();
  const { token } = tokens.issue({ runId: opts.runId, providers: [] });
  const endpoint = gatewayEndpoint(tokens, () => {
    const server = new Server({ name: 'airlock', version: APP_VERSION }, { capabilities: { tools: {} }, instructions: 'Tools of the MCP servers the user enabled for this Airlock run; each name starts with its server.' });
    server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: listed }));
    server.setRequestHandler(CallToolRequestSchema, (req, extra) => callTool(req.params.name, req.params.arguments, extra.signal));
    return server;
  });
  try {
    await new Promise<void>((resolve, reject) => {
      endpoint.http.once('error', reject);
      endpoint.http.listen(0, '127.0.0.1', () => resolve());
    });
  } catch (err) {
    await closeUpstreams();
    throw err;
  }
  const port = (endpoint.http.address() as AddressInfo).port;
  let disposed = false;
  return {
    token,
    port,
    tools,
    record,
    onDidCall: calls.event,
    ...(opts.questions ? { questions: opts.questions } : {}),
    connect: () => netConnect(port, '127.0.0.1'),
    dispose() {
      if (disposed) return;
      disposed = true;
      // The token dies first: nothing presented after this is served. Waiting calls are refused (closed).
      tokens.clear();
      opts.questions?.dispose();
      calls.dispose();
      endpoint.close();
      void closeUpstreams();
    },
  };
}

/**
 * The tools one server offers the run, named `<server>__<tool>` and added to `tools`; a name the APIs
 * would not take, or one already taken, is skipped (and recorded). Returns the server's record.
 */
async function serveToolsOf(server: ResolvedMcpServer, up: Upstream, forms: readonly string[], tools: GatewayTool[]): Promise<RunMcpGateway['record']['servers'][number]> {
  const { tools: listed, cut } = await listAll(up);
  const skipped: string[] = [];
  for (const t of listed) {
    const name = `${server.entry.name}${TOOL_SEPARATOR}${t.name}`;
    if (!TOOL_NAME.test(name) || tools.some((x) => x.name === name)) {
      skipped.push(scrubText(t.name, forms).slice(0, 80));
      continue;
    }
    // What the sandbox reads is scrubbed like any answer: a description can echo a credential too.
    const served = JSON.parse(scrubText(JSON.stringify({ ...t, name }), forms)) as Tool;
    tools.push({
      server: server.entry.name,
      tool: t.name,
      name,
      descriptionHash: toolDescriptionHash(t),
      annotations: hints(t),
      definition: served,
    });
  }
  if (cut) skipped.push(`(more than ${MAX_TOOLS_PER_SERVER} tools: the rest)`);
  const origin = serverOrigin(server.entry);
  return { name: server.entry.name, origin, transport: server.entry.transport, tools: listed.length - skipped.length + (cut ? 1 : 0), ...(skipped.length ? { skipped } : {}) };
}

/**
 * A call from the sandbox: the policy decides, the server's client forwards it, and the answer comes
 * back scrubbed of every credential and capped; every call, refused or not, is reported on `calls`.
 */
function toolCaller(gw: { tools: readonly GatewayTool[]; upstreams: readonly Upstream[]; forms: readonly string[]; calls: Emitter<McpCallEvent>; policy?: McpCallPolicy }) {
  const { forms, calls } = gw;
  const byName = new Map(gw.tools.map((t) => [t.name, t]));
  const clientOf = new Map(gw.upstreams.map((u) => [u.name, u.client]));
  return async (name: string, args: Record<string, unknown> | undefined, signal?: AbortSignal): Promise<CallToolResult> => {
    const started = Date.now();
    const argsJson = JSON.stringify(args ?? {});
    const base = { argsSha256: sha256(argsJson), argsBytes: Buffer.byteLength(argsJson) };
    const tool = byName.get(name);
    if (!tool) return errorResult(`no tool named "${name.slice(0, 100)}" in this run's MCP gateway`);
    const verdict: { decision: McpDecision; by?: string; reason?: string } = gw.policy ? await gw.policy(tool, { argsSha256: base.argsSha256, args: args ?? {}, ...(signal ? { signal } : {}) }) : { decision: 'allow' };
    const by = verdict.by ? { by: verdict.by } : {};
    const finish = (result: CallToolResult, decision: McpDecision, extra: { reason?: string; capped?: true } = {}): CallToolResult => {
      const resultBytes = Buffer.byteLength(JSON.stringify(result));
      calls.fire({ server: tool.server, tool: tool.tool, ...base, decision, ...by, resultBytes, isError: result.isError === true, durationMs: Date.now() - started, ...extra });
      return result;
    };
    if (verdict.decision === 'deny') return finish(errorResult(`Airlock refused this call to ${tool.server}/${tool.tool}: ${verdict.reason ?? 'denied by policy'}`), 'deny', verdict.reason ? { reason: verdict.reason } : {});
    const client = clientOf.get(tool.server) as Client;
    let raw: unknown;
    try {
      raw = await client.callTool({ name: tool.tool, arguments: args ?? {} }, undefined, { timeout: CALL_TIMEOUT_MS });
    } catch (err) {
      const why = scrubText((err as Error).message ?? String(err), forms).slice(0, 500);
      return finish(errorResult(`the MCP server "${tool.server}" failed: ${why}`), 'allow', { reason: why.slice(0, 200) });
    }
    const text = scrubText(JSON.stringify(raw), forms);
    if (Buffer.byteLength(text) > MAX_RESULT_BYTES) {
      return finish(errorResult(`the answer of ${tool.server}/${tool.tool} (${Buffer.byteLength(text)} bytes) is over Airlock's cap of ${MAX_RESULT_BYTES} bytes and was not passed on; ask for less`), 'allow', { capped: true, reason: 'result over the cap' });
    }
    return finish(JSON.parse(text) as CallToolResult, 'allow');
  };
}

/**
 * The endpoint the sandbox reaches: only with the run's token and never from a web page, at
 * GATEWAY_PATH, one MCP server (from `newServer`) per Streamable HTTP session, at most MAX_SESSIONS.
 */
function gatewayEndpoint(tokens: RunTokenRegistry, newServer: () => Server): { http: HttpServer; close(): void } {
  const sessions = new Map<string, { transport: StreamableHTTPServerTransport; server: Server }>();
  const refuse = (res: ServerResponse, status: number, message: string) => {
    res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message }, id: null }));
  };
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    // Only the sandbox's agent talks to the gateway: never a web page, never without the run's token.
    if (req.headers.origin !== undefined) return refuse(res, 403, 'Forbidden: requests from web pages are refused.');
    if (!tokens.check(presentedToken(req.headers))) return refuse(res, 401, "Unauthorized: send 'Authorization: Bearer <the run's MCP token>'.");
    const path = (req.url ?? '/').split('?')[0];
    if (path !== GATEWAY_PATH) return refuse(res, 404, `Not found: the MCP endpoint is ${GATEWAY_PATH}.`);
    const sessionId = req.headers['mcp-session-id'];
    const known = typeof sessionId === 'string' ? sessions.get(sessionId) : undefined;
    if (known) return known.transport.handleRequest(req, res);
    if (sessionId !== undefined) return refuse(res, 404, 'Unknown or ended MCP session; initialize a new one.');
    if (req.method !== 'POST') return refuse(res, 400, 'Start with an initialize request (POST).');
    if (sessions.size >= MAX_SESSIONS) return refuse(res, 429, `Too many MCP sessions open (${MAX_SESSIONS}); end one first.`);
    const server = newServer();
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      maxRequestBodySize: MAX_REQUEST_BYTES,
      onsessioninitialized: (id) => void sessions.set(id, { transport, server }),
    });
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId);
    };
    await server.connect(transport);
    await transport.handleRequest(req, res);
    // A request that opened no session leaves no server behind.
    if (!transport.sessionId) await server.close().catch(debugLog.swallow('mcpGateway.session.close'));
  };
  const http = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      debugLog.swallow('mcp-gateway.request')(err);
      if (!res.headersSent) refuse(res, 500, 'Internal error');
      else res.destroy();
    });
  });
  return {
    http,
    close() {
      // Sessions end with the gateway: a server that fails to close has nothing left to serve.
      for (const { server } of sessions.values()) void server.close().catch(debugLog.swallow('mcpGateway.dispose.close'));
      sessions.clear();
      http.closeAllConnections();
      http.close();
    },
  };
}
