import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { digest, loopbackRefusal, tokenMatches } from '../host/host-server';
import { createMcpConnection, type McpConnection, type McpDeps } from './mcp-server';
import { debugLog } from '../common/debug-log';

/** The path clients are given: `http://127.0.0.1:<port>/mcp`. */
export const MCP_HTTP_PATH = '/mcp';
/** Largest JSON-RPC request body (a capped file write in base64, with room). */
const BODY_BYTES = 32 * 1024 * 1024;
/** Client sessions at once over HTTP; each holds its own capped sandboxes. */
const MAX_SESSIONS = 32;
/** A session holding no sandbox and sending nothing for this long is ended (clients often leave without DELETE). */
const SESSION_IDLE_MS = 10 * 60_000;

interface Session {
  transport: StreamableHTTPServerTransport;
  connection: McpConnection;
  lastSeen: number;
  /** Requests (and open SSE streams) in progress. */
  inFlight: number;
}

export interface McpHttpServer {
  readonly url: string;
  readonly port: number;
  readonly token: string;
  /** Live client sessions. */
  readonly sessions: number;
  /** Ends every session (their sandboxes are wiped) and closes the server. */
  close(): Promise<void>;
}

/** An HTTP refusal with a JSON-RPC error body; the codes are the SDK transport's (-32001 an unknown session, -32603 internal, -32000 the rest). */
function refuse(res: ServerResponse, status: number, message: string, code = status >= 500 ? -32603 : -32000): void {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}

/**
 * The MCP door over Streamable HTTP (docs/architecture.md §17), on 127.0.0.1 only, with the UI
 * host's checks: a loopback `Host` (DNS rebinding), an `Origin` only from this host (so no web page
 * can drive it), and a bearer token. Each client session is one MCP connection with its own
 * sandboxes, wiped when the session is deleted or the server closes.
 */
export async function startMcpHttpServer(deps: McpDeps, opts: { port?: number; token?: string; sessionIdleMs?: number } = {}): Promise<McpHttpServer> {
  const token = opts.token ?? randomBytes(32).toString('base64url');
  const tokenDigest = digest(token);
  const sessions = new Map<string, Session>();
  let port = 0;

  /** Ends a session: its sandboxes are wiped, its transport closed, its place freed. */
  const endSession = async (id: string, reason: string) => {
    const s = sessions.get(id);
    if (!s) return;
    sessions.delete(id);
    await s.connection.close(reason);
    await s.transport.close().catch(debugLog.swallow('mcpHttp.transport.close'));
  };
  const idle = (s: Session) => s.inFlight === 0 && s.connection.sandboxes.size === 0;
  const idleMs = opts.sessionIdleMs ?? SESSION_IDLE_MS;
  const sweep = setInterval(() => {
    const now = Date.now();
    for (const [id, s] of sessions) if (idle(s) && now - s.lastSeen >= idleMs) void endSession(id, 'the client went quiet');
  }, Math.max(50, Math.min(60_000, idleMs / 4)));
  sweep.unref();
  /** At the cap, the longest-quiet session that holds nothing makes room (a client that left without DELETE). */
  const makeRoom = async (): Promise<boolean> => {
    if (sessions.size < MAX_SESSIONS) return true;
    const oldest = [...sessions].filter(([, s]) => idle(s)).sort((a, b) => a[1].lastSeen - b[1].lastSeen)[0];
    if (!oldest) return false;
    await endSession(oldest[0], 'a new client needed its place');
    return true;
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', `http://127.0.0.1:${port}`);
    const refusal = loopbackRefusal(req, port, false, { localhost: true });
    if (refusal) return refuse(res, 403, refusal === 'bad-host' ? 'Forbidden: the Host header must be this loopback address.' : 'Forbidden: requests from web pages are refused.');
    const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    if (!tokenMatches(bearer, tokenDigest)) return refuse(res, 401, "Unauthorized: send 'Authorization: Bearer <token>' with the token Airlock's Settings show for MCP.");
    if (url.pathname !== MCP_HTTP_PATH) return refuse(res, 404, `Not found: the MCP endpoint is ${MCP_HTTP_PATH}.`);
    const sessionId = req.headers['mcp-session-id'];
    const known = typeof sessionId === 'string' ? sessions.get(sessionId) : undefined;
    if (known) {
      known.lastSeen = Date.now();
      known.inFlight += 1;
      res.once('close', () => {
        known.inFlight -= 1;
        known.lastSeen = Date.now();
      });
      return known.transport.handleRequest(req, res);
    }
    if (sessionId !== undefined) return refuse(res, 404, 'Session not found: unknown or ended MCP session; initialize a new one.', -32001);
    if (req.method !== 'POST') return refuse(res, 400, 'Bad Request: no Mcp-Session-Id; start with an initialize request (POST).');
    if (!(await makeRoom())) return refuse(res, 429, `Too many MCP sessions holding sandboxes (${MAX_SESSIONS}); end one first.`);
    const connection = createMcpConnection(deps);
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      maxRequestBodySize: BODY_BYTES,
      onsessioninitialized: (id) => void sessions.set(id, { transport, connection, lastSeen: Date.now(), inFlight: 0 }),
    });
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId);
      void connection.close('the client ended its session');
    };
    await connection.server.connect(transport);
    await transport.handleRequest(req, res);
    // Not an initialize request (or a malformed one): nothing was opened, nothing is kept.
    if (!transport.sessionId) await connection.close('no session was opened');
  };

  const server = createServer((req, res) => {
    handle(req, res).catch(() => {
      if (!res.headersSent) refuse(res, 500, 'Internal error');
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, '127.0.0.1', () => resolve());
  });
  port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}${MCP_HTTP_PATH}`,
    port,
    token,
    get sessions() {
      return sessions.size;
    },
    async close() {
      clearInterval(sweep);
      const all = [...sessions.values()];
      sessions.clear();
      await Promise.all(all.map(({ connection }) => connection.close('Airlock stopped serving MCP over HTTP')));
      await Promise.all(all.map(({ transport }) => transport.close().catch(debugLog.swallow('mcpHttp.transport.close'))));
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
