import type http from 'node:http';
import type net from 'node:net';
import type { Transform } from 'node:stream';
import { endToEndHeaders } from '../../common/hop-headers';
import { withoutHeaders } from './gateway-http';

/** What the relay reports when the upgraded connection (or the declined answer) is over. */
export interface UpgradeOutcome {
  status: number;
  bytesUp: number;
  bytesDown: number;
  reason?: string;
}

/** How an upgrade toward a secret-bound host is scrubbed: header values, and the stream downward. */
export interface UpgradeScrub {
  text(value: string): string;
  stream(): Transform | undefined;
}

/**
 * A WebSocket (or other HTTP/1.1) upgrade the gateway already judged (docs/architecture.md §2.8):
 * sends it upstream and, on `101`, joins the client's socket to the server's, counting bytes both
 * ways; a declined upgrade is passed on and the connection closed.
 */
export function relayUpgrade(upstream: http.ClientRequest, socket: net.Socket, head: Buffer, origin: string, scrub: UpgradeScrub | undefined, done: (o: UpgradeOutcome) => void): void {
  const text = scrub ? scrub.text : (v: string) => v;
  upstream.on('upgrade', (up: http.IncomingMessage, upSocket: net.Socket, upHead: Buffer) => {
    let head101 = `HTTP/1.1 ${up.statusCode ?? 101} ${text(up.statusMessage ?? 'Switching Protocols')}\r\n`;
    for (let i = 0; i + 1 < up.rawHeaders.length; i += 2) head101 += `${up.rawHeaders[i]}: ${text(up.rawHeaders[i + 1] as string)}\r\n`;
    socket.write(`${head101}\r\n`);
    if (head.length) upSocket.write(head);
    let bytesUp = head.length;
    let bytesDown = upHead.length;
    socket.on('data', (c: Buffer) => (bytesUp += c.length));
    upSocket.on('data', (c: Buffer) => (bytesDown += c.length));
    socket.pipe(upSocket);
    const down = scrub?.stream();
    if (down) {
      down.on('error', () => socket.destroy());
      if (upHead.length) down.write(upHead);
      upSocket.pipe(down).pipe(socket);
    } else {
      if (upHead.length) socket.write(upHead);
      upSocket.pipe(socket);
    }
    const close = () => {
      socket.destroy();
      upSocket.destroy();
    };
    socket.once('close', close);
    upSocket.once('close', () => {
      close();
      done({ status: up.statusCode ?? 101, bytesUp, bytesDown });
    });
    socket.on('error', close);
    upSocket.on('error', close);
  });
  upstream.on('response', (up: http.IncomingMessage) => {
    // The server declined the upgrade: pass its answer on and close.
    let head = `HTTP/1.1 ${up.statusCode ?? 502} ${text(up.statusMessage ?? '')}\r\n`;
    const out = withoutHeaders(endToEndHeaders(up.rawHeaders), 'content-length');
    for (let i = 0; i + 1 < out.length; i += 2) head += `${out[i]}: ${text(out[i + 1] as string)}\r\n`;
    socket.write(`${head}Connection: close\r\n\r\n`);
    const down = scrub?.stream();
    if (down) up.pipe(down).pipe(socket);
    else up.pipe(socket);
    up.once('end', () => done({ status: up.statusCode ?? 502, bytesUp: 0, bytesDown: 0 }));
  });
  upstream.on('error', (err: NodeJS.ErrnoException) => {
    const body = `airlock: could not reach ${origin} (${err.code ?? err.message})\n`;
    socket.end(`HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
    done({ status: 502, reason: err.code ?? err.message, bytesUp: 0, bytesDown: 0 });
  });
  upstream.end();
}
