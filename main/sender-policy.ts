/**
 * Which renderer URLs may call the API: the packaged UI (file:// under the renderer folder) or,
 * in development, the electron-vite dev server. Anything else (a navigated-away page, an iframe,
 * an injected window) is refused.
 */
export function isTrustedRendererUrl(url: string | undefined, allowed: { rendererFileUrl: string; devServerUrl?: string }): boolean {
  if (!url) return false;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return false;
  }
  if (parsed.protocol === 'file:') {
    const want = new URL(allowed.rendererFileUrl);
    return parsed.pathname === want.pathname;
  }
  if (allowed.devServerUrl) {
    const dev = new URL(allowed.devServerUrl);
    return parsed.origin === dev.origin;
  }
  return false;
}
