/**
 * Which links the UI may open outside itself (docs/architecture.md §2.7): web pages over https,
 * and published preview ports on the host's loopback (`http://127.0.0.1:<port>/…`). Everything
 * else — `file:`, `javascript:`, `data:`, other http hosts, links with credentials — is refused.
 * Electron's main process and the renderer (terminal links, preview links) share this one rule.
 */
export function externalLinkUrl(raw: string): string | undefined {
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    return undefined;
  }
  if (url.username || url.password) return undefined;
  if (url.protocol === 'https:' && url.hostname) return url.href;
  if (url.protocol === 'http:' && url.hostname === '127.0.0.1' && url.port) return url.href;
  return undefined;
}
