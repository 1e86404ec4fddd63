/** A published preview port, as far as links care. */
export interface LinkablePreview {
  sandboxPort: number;
  hostPort: number;
}

const LOOPBACK_NAMES = new Set(['127.0.0.1', 'localhost', '[::1]']);

/**
 * Which links the UI may open outside itself (docs/architecture.md §2.7): web pages over https,
 * and the preview ports a run has published (`previews`). A loopback http link opens only when its
 * port is one of them — by host port, or by the sandbox port a server inside printed, which is
 * translated to its host port — and always as `http://localhost:<host port>/…`, the previews'
 * own site (never 127.0.0.1, where the browser UI keeps its cookies). Everything else — `file:`,
 * `javascript:`, `data:`, other http hosts or ports, links with credentials — is refused.
 * Electron's main process and the renderer (terminal links, preview links) share this one rule.
 */
export function externalLinkUrl(raw: string, previews: readonly LinkablePreview[] = []): string | undefined {
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    return undefined;
  }
  if (url.username || url.password) return undefined;
  if (url.protocol === 'https:' && url.hostname) return url.href;
  if (url.protocol !== 'http:' || !LOOPBACK_NAMES.has(url.hostname) || !url.port) return undefined;
  const port = Number(url.port);
  const preview = previews.find((p) => p.hostPort === port) ?? previews.find((p) => p.sandboxPort === port);
  if (!preview) return undefined;
  return `http://localhost:${preview.hostPort}${url.pathname}${url.search}${url.hash}`;
}
