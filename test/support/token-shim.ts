import { createServer, request, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A loopback forwarder the test controls, in front of the MCP HTTP door. */
export interface TokenShim {
  /** `http://localhost:<shim port>/mcp` (the conformance suite's DNS-rebinding check wants a localhost URL). */
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
}

/**
 * For clients that cannot send a bearer token (the official conformance suite's client sends no
 * headers of its own): this forwards every request to the door on 127.0.0.1 and adds
 * `Authorization: Bearer <token>`. It is the test's, never the product's: the door keeps every
 * check. A `Host` or `Origin` naming the shim is rewritten to name the door (what a client aimed at the
 * door would send); any other value passes unchanged, so the door's DNS-rebinding and Origin checks
 * see what the client sent.
 */
export async function startTokenShim(doorPort: number, token: string, path = '/mcp'): Promise<TokenShim> {
  let port = 0;
  const shimHosts = () => new Set([`localhost:${port}`, `127.0.0.1:${port}`]);
  const rewrite = (headers: IncomingHttpHeaders): IncomingHttpHeaders => {
    const out: IncomingHttpHeaders = { ...headers, authorization: `Bearer ${token}` };
    const door = `127.0.0.1:${doorPort}`;
    if (typeof headers.host === 'string' && shimHosts().has(headers.host.toLowerCase())) out.host = door;
    if (typeof headers.origin === 'string') {
      const origin = /^http:\/\/([^/]+)$/.exec(headers.origin)?.[1];
      if (origin && shimHosts().has(origin.toLowerCase())) out.origin = `http://${door}`;
    }
    return out;
  };
  const server: Server = createServer((req, res) => {
    const upstream = request({ host: '127.0.0.1', port: doorPort, method: req.method, path: req.url, headers: rewrite(req.headers) }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    upstream.on('error', () => (res.headersSent ? res.destroy() : res.writeHead(502).end()));
    // A client that goes (an SSE stream cancelled) ends the forwarded request too.
    res.on('close', () => upstream.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  port = (server.address() as AddressInfo).port;
  return {
    url: `http://localhost:${port}${path}`,
    port,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
