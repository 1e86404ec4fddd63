import { describe, expect, it } from 'vitest';
import { isTrustedRendererUrl } from './sender-policy';
import { windowPaths } from './window-paths';

describe('isTrustedRendererUrl', () => {
  it('accepts the UI on its app:// origin', () => {
    expect(isTrustedRendererUrl('app://airlock/index.html')).toBe(true);
    expect(isTrustedRendererUrl('app://airlock/index.html#x')).toBe(true);
  });
  it('refuses file:// pages, other app:// hosts and paths, other origins and garbage', () => {
    expect(isTrustedRendererUrl('file:///opt/Airlock/resources/app.asar/out/renderer/index.html')).toBe(false);
    expect(isTrustedRendererUrl('app://evil/index.html')).toBe(false);
    expect(isTrustedRendererUrl('app://airlock/other.html')).toBe(false);
    expect(isTrustedRendererUrl('https://example.invalid/')).toBe(false);
    expect(isTrustedRendererUrl('http://localhost:5173/')).toBe(false);
    expect(isTrustedRendererUrl('not a url')).toBe(false);
    expect(isTrustedRendererUrl(undefined)).toBe(false);
  });
  it('accepts the dev server only when one is configured', () => {
    expect(isTrustedRendererUrl('http://localhost:5173/', { devServerUrl: 'http://localhost:5173' })).toBe(true);
    expect(isTrustedRendererUrl('http://localhost:5174/', { devServerUrl: 'http://localhost:5173' })).toBe(false);
  });
});

describe('windowPaths', () => {
  const resources = { preloadFile: '/app/out/preload/index.cjs', rendererDir: '/app/out/renderer' };
  it('ignores ELECTRON_RENDERER_URL in a packaged app: nobody who can set a variable picks the page the bridge trusts', () => {
    expect(windowPaths(resources, { packaged: true, env: { ELECTRON_RENDERER_URL: 'https://example.invalid/' } }).devServerUrl).toBeUndefined();
  });
  it('honours it in a development build only', () => {
    expect(windowPaths(resources, { packaged: false, env: { ELECTRON_RENDERER_URL: 'http://localhost:5173' } }).devServerUrl).toBe('http://localhost:5173');
    expect(windowPaths(resources, { packaged: false, env: {} }).devServerUrl).toBeUndefined();
  });
});
