import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { PATCH_DOWNLOAD_PATH, PATCH_SHA256_HEADER, PatchDownloadInput } from '../../contracts/diffs';
import { HOST_TERMINAL_STREAM_ACK_PARAM, HOST_TERMINAL_STREAM_PATH, HOST_TOKEN_PARAM, HOST_WS_PATH } from '../../contracts/transport';
import type { Event } from '../common/disposable';
import type { TerminalOutput } from '../common/terminal-output';
import type { ApiRouter } from '../api/router';
import { serveStatic } from './static-files';
import { bytesFromRouter, serveTerminalStream, type TerminalStream } from './terminal-stream';
import { WsSession } from './ws-session';
import { AIRLOCK_COOKIE_PREFIX } from '../network/cookie-scrub';
import { sha256Hex } from '../common/sha256';

export interface HostServerOptions {
  router: ApiRouter;
  /** The built renderer (vite output with index.html). */
  rendererDir: string;
  /** 0 (default) picks a free port. */
  port?: number;
  /** A fixed token for tests; random 256-bit otherwise. */
  token?: string;
  /** Terminal output as bytes (`AirlockServices.onDidTerminalOutput`); else the router's text is re-encoded. */
  terminalOutput?: Event<TerminalOutput>;
  /** The command the user ran to start this server (`npm start`, `airlock serve`), named on the 403 page. */
  launchCommand?: string;
}

export interface HostServer {
  /** `http://127.0.0.1:<port>/?token=<token>` — open this. */
  readonly url: string;
  readonly port: number;
  readonly token: string;
  /** Closes every WebSocket and the server. */
  close(): Promise<void>;
}

/**
 * The 403 page for a missing or old token: each start has a new token, so a tab left open from the
 * last start lands here (the renderer shows this text when it cannot reconnect).
 */
export function staleTokenText(launchCommand: string): string {
  return `Airlock restarted: open the new address printed by \`${launchCommand}\` (it carries the session token; this address is from an earlier session).\n`;
}

/** Refusal reasons, exported for tests. */
export type Refusal = 'bad-host' | 'bad-origin' | 'bad-token';

const BIND = '127.0.0.1';

/**
 * Content-Security-Policy of the served UI: scripts only from this origin, no plugins, no framing,
 * connections only back to this host. Inline styles are allowed because xterm.js injects them.
 */
export function contentSecurityPolicy(port: number): string {
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "font-src 'self' data:",
    `connect-src 'self' ws://${BIND}:${port}`,
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
    "object-src 'none'",
  ].join('; ');
}

export function digest(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}

function cookieToken(req: IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const [k, ...v] = part.trim().split('=');
    if (k === name) return v.join('=');
  }
  return undefined;
}

/**
 * The loopback checks every server of the app shares (UI host, MCP over HTTP): a `Host` of this
 * loopback port (against DNS rebinding) and, when present or required, an `Origin` of it too.
 */
export function loopbackRefusal(req: IncomingMessage, port: number, requireOrigin: boolean, opts: { localhost?: boolean } = {}): Exclude<Refusal, 'bad-token'> | undefined {
  // 127.0.0.1 only for the UI: `localhost` is where published previews live (another site, so a
  // preview can never set or shadow the UI's cookies; docs/architecture.md §12). The MCP door sets
  // no cookies and needs a bearer token: `localhost` (what clients are often given) is fine there.
  const hosts = [`${BIND}:${port}`, ...(opts.localhost ? [`localhost:${port}`] : [])];
  if (!hosts.includes(req.headers.host ?? '')) return 'bad-host';
  const origin = req.headers.origin;
  if (origin !== undefined || requireOrigin) {
    if (!origin || !hosts.map((h) => `http://${h}`).includes(origin)) return 'bad-origin';
  }
  return undefined;
}

/** Compares a presented token with the expected one's SHA-256, in constant time. */
export function tokenMatches(candidate: string | undefined | null, expectedDigest: Buffer): boolean {
  return Boolean(candidate) && timingSafeEqual(digest(candidate as string), expectedDigest);
}

/** The headers every answer carries: the content security policy for this port, no framing, no sniffing, no referrer. */
function securityHeaders(port: number): Record<string, string> {
  return {
    'content-security-policy': contentSecurityPolicy(port),
    'x-content-type-options': 'nosniff',
    'x-frame-options': 'DENY',
    'referrer-policy': 'no-referrer',
    'cross-origin-opener-policy': 'same-origin',
    'cross-origin-resource-policy': 'same-origin',
    'permissions-policy': 'camera=(), microphone=(), geolocation=()',
  };
}

/**
 * Serves the renderer and the API router over WebSocket on 127.0.0.1 (docs/architecture.md §2.7). Every
 * request needs the token (query parameter once, then a same-site cookie) and a loopback `Host`
 * (against DNS rebinding); a present `Origin` must be this host, and WebSocket upgrades must carry one.
 */
export async function startHostServer(opts: HostServerOptions): Promise<HostServer> {
  const token = opts.token ?? randomBytes(32).toString('base64url');
  const tokenDigest = digest(token);
  const sessions = new Set<WsSession>();
  const streams = new Map<string, TerminalStream>();
  const terminalOutput = opts.terminalOutput ?? bytesFromRouter(opts.router);
  let port = 0;
  const cookieName = () => `${AIRLOCK_COOKIE_PREFIX}${port}`;
  const tokenOk = (candidate: string | undefined | null) => tokenMatches(candidate, tokenDigest);

  /** Checks host, origin and token; returns why a request is refused, or undefined. */
  const check = (req: IncomingMessage, url: URL, requireOrigin: boolean): Refusal | undefined => {
    const refusal = loopbackRefusal(req, port, requireOrigin);
    if (refusal) return refusal;
    if (!tokenOk(url.searchParams.get(HOST_TOKEN_PARAM)) && !tokenOk(cookieToken(req, cookieName()))) return 'bad-token';
    return undefined;
  };

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', `http://${BIND}:${port}`);
    const isStream = url.pathname === HOST_TERMINAL_STREAM_PATH;
    // The stream and the patch download are POSTs so the browser always sends its Origin, which must be ours.
    const refusal = check(req, url, isStream || url.pathname === PATCH_DOWNLOAD_PATH);
    if (refusal) {
      res.writeHead(403, { ...securityHeaders(port), 'content-type': 'text/plain; charset=utf-8' })
        .end(refusal === 'bad-token' ? staleTokenText(opts.launchCommand ?? 'airlock serve') : 'Forbidden\n');
      return;
    }
    if (url.pathname === PATCH_DOWNLOAD_PATH && req.method === 'POST') {
      void servePatchDownload(req, res, opts.router, securityHeaders(port)).catch(() => res.destroy());
      return;
    }
    if (isStream && req.method === 'POST') {
      const stream = serveTerminalStream(req, res, terminalOutput, securityHeaders(port), url.searchParams.get(HOST_TERMINAL_STREAM_ACK_PARAM) === '1');
      streams.set(stream.id, stream);
      res.on('close', () => streams.delete(stream.id));
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { ...securityHeaders(port), allow: 'GET, HEAD' }).end();
      return;
    }
    if (url.searchParams.has(HOST_TOKEN_PARAM)) {
      // Trade the token in the URL for an HttpOnly cookie, so it leaves the address bar and history.
      res.writeHead(303, {
        ...securityHeaders(port),
        'set-cookie': `${cookieName()}=${token}; HttpOnly; SameSite=Strict; Path=/`,
        location: url.pathname,
        'cache-control': 'no-store',
      }).end();
      return;
    }
    void serveStatic(opts.rendererDir, url.pathname, res, securityHeaders(port));
  });

  const wss = new WebSocketServer({ noServer: true, maxPayload: 1024 * 1024, perMessageDeflate: false });
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const url = new URL(req.url ?? '/', `http://${BIND}:${port}`);
    const refusal = url.pathname === HOST_WS_PATH ? check(req, url, true) : 'bad-host';
    if (refusal) {
      socket.end('HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws: WebSocket) => {
      const session = new WsSession(ws, opts.router, (stream, bytes) => streams.get(stream)?.ack(bytes));
      sessions.add(session);
      ws.on('close', () => {
        session.dispose();
        sessions.delete(session);
      });
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, BIND, () => resolve());
  });
  port = (server.address() as AddressInfo).port;

  return {
    url: `http://${BIND}:${port}/?${HOST_TOKEN_PARAM}=${token}`,
    port,
    token,
    async close() {
      for (const s of sessions) s.close();
      for (const s of streams.values()) s.dispose();
      wss.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Largest JSON body the patch download takes (a selection of many lines). */
const DOWNLOAD_BODY_BYTES = 8 * 1024 * 1024;

/**
 * The patch of a selection as a file download (`Content-Disposition: attachment`), rendered by the
 * same contract as everywhere (`diffs:exportPatch`, recorded in the apply log as a download). The
 * caller has checked Host, Origin and token.
 */
async function servePatchDownload(req: IncomingMessage, res: ServerResponse, router: ApiRouter, headers: Record<string, string>): Promise<void> {
  const fail = (status: number, message: string) => res.writeHead(status, { ...headers, 'content-type': 'text/plain; charset=utf-8' }).end(`${message}\n`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > DOWNLOAD_BODY_BYTES) return void fail(413, 'The selection is too large.');
    chunks.push(chunk);
  }
  let body: unknown;
  try {
    body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    return void fail(400, 'The request body must be JSON: { runId, files?, selection? }.');
  }
  const input = PatchDownloadInput.safeParse(body);
  if (!input.success) return void fail(400, `Bad selection: ${input.error.issues[0]?.message ?? 'invalid'}.`);
  const out = await router.invoke('diffs:exportPatch', { ...input.data, to: 'download' });
  if (!out.ok) return void fail(out.error.kind === 'NOT_FOUND' ? 404 : out.error.kind === 'INVALID_INPUT' ? 400 : 409, out.error.message);
  const value = out.value as { text?: string; sha256?: string; bytes: number };
  if (value.text === undefined) return void fail(413, `The patch is ${value.bytes} bytes, too large to download here; write it with 'airlock patch ${input.data.runId} --out FILE'.`);
  const bytes = Buffer.from(value.text, 'utf8');
  if (value.sha256 && sha256Hex(bytes) !== value.sha256) {
    return void fail(409, `The patch is not UTF-8 text, so it cannot be downloaded byte for byte here; write it with 'airlock patch ${input.data.runId} --out FILE'.`);
  }
  res.writeHead(200, {
    ...headers,
    'content-type': 'text/x-diff; charset=utf-8',
    'content-disposition': `attachment; filename="airlock-${input.data.runId}.patch"`,
    'content-length': String(bytes.length),
    'cache-control': 'no-store',
    ...(value.sha256 ? { [PATCH_SHA256_HEADER]: value.sha256 } : {}),
  }).end(bytes);
}
