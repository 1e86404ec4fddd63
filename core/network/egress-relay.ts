import http from 'node:http';
import net from 'node:net';
import { endToEndHeaders, rawHeaderValues } from '../common/hop-headers';
import type { EgressEvent } from './egress-event';
import { Refusal } from './egress-policy';

/**
 * The egress proxy's dialling and relaying (docs/architecture.md §2.8), after the policy admitted a
 * request: connect to exactly the checked addresses, then pipe a CONNECT tunnel or forward one
 * plain-HTTP request, counting bytes both ways and reporting each attempt once when it is over.
 */

/** One attempt as the relay reports it (the proxy adds id, run and times). */
export type RelayRecord = Omit<EgressEvent, 'id' | 'runId' | 'at' | 'durationMs'> & { started: number };

/** What the relay needs from its proxy. */
export interface RelayContext {
  fire(e: RelayRecord): void;
  /** Every socket is tracked, so closing the proxy cuts it. */
  track(socket: net.Socket): void;
  connectTimeoutMs: number;
  idleTimeoutMs: number;
}

/**
 * Connects to the first reachable address of those checked (resolver order), all within the
 * connect timeout. Never looks the name up again.
 */
export async function dialChecked(relay: RelayContext, host: string, addresses: string[], port: number): Promise<{ socket: net.Socket; address: string }> {
  const deadline = performance.now() + relay.connectTimeoutMs;
  const errors: string[] = [];
  for (const address of addresses) {
    const remaining = deadline - performance.now();
    if (remaining <= 0) break;
    const socket = net.connect({ host: address, port });
    relay.track(socket);
    // Errors after connecting are handled by the tunnel/forwarder; this keeps a late one from crashing.
    socket.on('error', () => undefined);
    const outcome = await new Promise<string | undefined>((resolve) => {
      const timer = setTimeout(() => resolve('timed out'), remaining);
      socket.once('connect', () => {
        clearTimeout(timer);
        resolve(undefined);
      });
      socket.once('error', (err: NodeJS.ErrnoException) => {
        clearTimeout(timer);
        resolve(err.code ?? err.message);
      });
    });
    if (outcome === undefined) return { socket, address };
    socket.destroy();
    errors.push(`${address}: ${outcome}`);
  }
  const timedOut = errors.length === 0 || errors[errors.length - 1]?.endsWith('timed out');
  const why = timedOut && errors.length === 0 ? 'connect timed out' : `connect failed (${errors.join(', ')})`;
  throw new Refusal(timedOut ? 504 : 502, why, `airlock: could not connect to ${host}:${port} (${why})`, true, addresses[0]);
}

export function openTunnel(
  relay: RelayContext,
  client: net.Socket,
  head: Buffer,
  ctx: { host: string; port: number; method: string; started: number },
  upstream: net.Socket,
  address: string,
): void {
  if (client.destroyed) {
    upstream.destroy();
    relay.fire({ ...ctx, allowed: true, reason: 'client went away', address, bytesUp: 0, bytesDown: 0 });
    return;
  }
  let bytesUp = head.length;
  let bytesDown = 0;
  let failure: string | undefined;
  let closedSides = 0;
  const onClosed = () => {
    closedSides += 1;
    if (closedSides < 2) return;
    relay.fire({ ...ctx, allowed: true, ...(failure ? { reason: failure } : {}), address, bytesUp, bytesDown });
  };
  client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
  if (head.length > 0) upstream.write(head);
  client.on('data', (chunk: Buffer) => {
    bytesUp += chunk.length;
  });
  upstream.on('data', (chunk: Buffer) => {
    bytesDown += chunk.length;
  });
  client.pipe(upstream);
  upstream.pipe(client);
  const idle = () => {
    failure ??= 'idle timeout';
    client.destroy();
    upstream.destroy();
  };
  client.setTimeout(relay.idleTimeoutMs, idle);
  upstream.setTimeout(relay.idleTimeoutMs, idle);
  upstream.on('error', (err: NodeJS.ErrnoException) => {
    failure ??= `upstream error (${err.code ?? err.message})`;
  });
  upstream.once('close', () => {
    client.end();
    // Nothing the client still sends can go anywhere now. Unread, its end is never seen, so its
    // socket is never destroyed and holds a connection of the proxy's maxConnections until the idle
    // timeout (issue 44: npm's finished tunnels used all 512, and the next connections were closed
    // unanswered). Draining lets it end and close.
    client.resume();
    onClosed();
  });
  client.once('close', () => {
    upstream.destroy();
    onClosed();
  });
}

export function forwardHttp(
  relay: RelayContext,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  ctx: { host: string; port: number; method: string; started: number },
  socket: net.Socket,
  address: string,
  path: string,
): void {
  if (res.destroyed) {
    socket.destroy();
    relay.fire({ ...ctx, allowed: true, reason: 'client went away', address, bytesUp: 0, bytesDown: 0 });
    return;
  }
  const headers = endToEndHeaders(req.rawHeaders);
  if (rawHeaderValues(req.rawHeaders, 'host').length === 0) {
    headers.push('Host', ctx.port === 80 ? ctx.host : `${ctx.host}:${ctx.port}`);
  }
  let bytesUp = 0;
  let bytesDown = 0;
  let failure: string | undefined;
  let done = false;
  const finish = () => {
    if (done) return;
    done = true;
    relay.fire({ ...ctx, allowed: true, ...(failure ? { reason: failure } : {}), address, bytesUp, bytesDown });
  };

  // The already-connected socket to the checked address; no agent, so it is never reused.
  const upstreamReq = http.request({
    host: address,
    port: ctx.port,
    method: ctx.method,
    path,
    headers,
    setHost: false,
    createConnection: () => socket,
  });
  socket.setTimeout(relay.idleTimeoutMs, () => {
    failure ??= 'idle timeout';
    upstreamReq.destroy();
  });
  req.on('data', (chunk: Buffer) => {
    bytesUp += chunk.length;
  });
  req.pipe(upstreamReq);
  upstreamReq.on('response', (upstreamRes: http.IncomingMessage) => {
    const out = endToEndHeaders(upstreamRes.rawHeaders);
    res.writeHead(upstreamRes.statusCode ?? 502, upstreamRes.statusMessage, out);
    upstreamRes.on('data', (chunk: Buffer) => {
      bytesDown += chunk.length;
    });
    upstreamRes.pipe(res);
    upstreamRes.on('error', () => res.destroy());
    res.once('close', () => {
      if (!upstreamRes.complete) failure ??= 'closed before the response was complete';
      upstreamRes.destroy();
      finish();
    });
  });
  upstreamReq.on('error', (err: NodeJS.ErrnoException) => {
    failure ??= `upstream failed (${err.code ?? err.message})`;
    if (!res.headersSent) {
      const status = 502;
      const body = `airlock: could not reach ${ctx.host}:${ctx.port} (${failure})\n`;
      res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': Buffer.byteLength(body), Connection: 'close' });
      res.end(body);
      finish();
    } else {
      res.destroy();
    }
  });
  res.once('close', () => {
    if (!res.writableFinished) upstreamReq.destroy();
    if (!res.headersSent) {
      // The client went away before any response: nothing else will finish the record.
      failure ??= 'client went away';
      finish();
    }
  });
}
