import { APP_INDEX_URL } from './app-protocol';

/**
 * Which renderer URLs may call the API: the UI at `app://airlock/index.html` (main/app-protocol.ts)
 * or, in an unpackaged development build only, the electron-vite dev server. Anything else (a
 * navigated-away page, an iframe, an injected window, a file:// page) is refused.
 */
export function isTrustedRendererUrl(url: string | undefined, allowed: { devServerUrl?: string } = {}): boolean {
  if (!url) return false;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return false;
  }
  const app = new URL(APP_INDEX_URL);
  if (parsed.protocol === app.protocol) return parsed.host === app.host && parsed.pathname === app.pathname;
  if (allowed.devServerUrl) {
    const dev = new URL(allowed.devServerUrl);
    return parsed.origin === dev.origin;
  }
  return false;
}
