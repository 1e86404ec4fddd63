import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import { extname, join, normalize, sep } from 'node:path';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff': 'font/woff',
  '.woff2': 'font/woff2',
  '.ttf': 'font/ttf',
  '.wasm': 'application/wasm',
  '.map': 'application/json',
};

/** The Content-Type of a built renderer file (also the Electron app:// handler's, main/app-protocol.ts). */
export function staticContentType(file: string): string {
  return TYPES[extname(file).toLowerCase()] ?? 'application/octet-stream';
}

/** Resolves a URL path inside `root`, or undefined when it would leave it. */
export function resolveStaticPath(root: string, urlPath: string): string | undefined {
  let decoded: string;
  try {
    decoded = decodeURIComponent(urlPath);
  } catch {
    return undefined;
  }
  if (decoded.includes('\0')) return undefined;
  const rel = normalize(decoded === '/' ? '/index.html' : decoded).replace(/^([/\\])+/, '');
  const full = join(root, rel);
  return full === root || full.startsWith(root.endsWith(sep) ? root : root + sep) ? full : undefined;
}

/** Streams a file of the built renderer; 404 for anything missing or outside the root. */
export async function serveStatic(root: string, urlPath: string, res: ServerResponse, headers: Record<string, string>): Promise<void> {
  const file = resolveStaticPath(root, urlPath);
  const info = file ? await stat(file).catch(() => undefined) : undefined; // no such file: 404
  if (!file || !info?.isFile()) {
    res.writeHead(404, { ...headers, 'content-type': 'text/plain; charset=utf-8' }).end('not found\n');
    return;
  }
  const type = staticContentType(file);
  // index.html carries no secret, but must be re-fetched so a rebuilt UI is picked up.
  const cache = file.endsWith('index.html') ? 'no-store' : 'private, max-age=3600';
  res.writeHead(200, { ...headers, 'content-type': type, 'content-length': String(info.size), 'cache-control': cache });
  const stream = createReadStream(file);
  stream.on('error', () => res.destroy());
  stream.pipe(res);
}
