import { readFile, realpath } from 'node:fs/promises';
import path from 'node:path';
import { resolveStaticPath, staticContentType } from '../core/host/static-files';

/**
 * The UI's own origin, `app://airlock` (docs/architecture.md §2.7): a privileged standard scheme
 * served from the renderer folder by the main process, so the page gets the response header CSP
 * (which file:// documents never get), a real origin for `'self'`, and the file-access fuse can stay
 * off. Electron-free: Request/Response are the web's (Node has them too), so tests run the handler.
 */
export const APP_SCHEME = 'app';
export const APP_ORIGIN = 'app://airlock';
export const APP_INDEX_URL = `${APP_ORIGIN}/index.html`;

/** What `protocol.registerSchemesAsPrivileged` needs, before the app is ready. */
export const APP_SCHEME_PRIVILEGES = { standard: true, secure: true, supportFetchAPI: true, corsEnabled: true, codeCache: true } as const;

/**
 * The `app:` protocol handler: GET/HEAD of files inside `rendererDir` only (no `..`, no symlink out,
 * no other host), each with the one CSP and `nosniff`. Anything else is a 404 or 405 without detail.
 */
export function appProtocolHandler(rendererDir: string, csp: string): (request: Request) => Promise<Response> {
  const rootDir = path.resolve(rendererDir);
  const refuse = (status: number) => new Response(null, { status, headers: { 'Content-Security-Policy': csp } });
  return async (request) => {
    if (request.method !== 'GET' && request.method !== 'HEAD') return refuse(405);
    let url: URL;
    try {
      url = new URL(request.url);
    } catch {
      return refuse(404);
    }
    if (`${url.protocol}//${url.host}` !== APP_ORIGIN) return refuse(404);
    const file = resolveStaticPath(rootDir, url.pathname);
    if (!file) return refuse(404);
    try {
      const real = await realpath(file);
      const realRoot = await realpath(rootDir);
      if (real !== realRoot && !real.startsWith(`${realRoot}${path.sep}`)) return refuse(404);
      const body = await readFile(real);
      const headers = {
        'Content-Type': staticContentType(real),
        'Content-Security-Policy': csp,
        'X-Content-Type-Options': 'nosniff',
      };
      return new Response(request.method === 'HEAD' ? null : body, { status: 200, headers });
    } catch {
      return refuse(404);
    }
  };
}
