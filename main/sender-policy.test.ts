import { describe, expect, it } from 'vitest';
import { isTrustedRendererUrl } from './sender-policy';

const allowed = { rendererFileUrl: 'file:///opt/Airlock/resources/app.asar/out/renderer/index.html' };

describe('isTrustedRendererUrl', () => {
  it('accepts the packaged renderer page', () => {
    expect(isTrustedRendererUrl('file:///opt/Airlock/resources/app.asar/out/renderer/index.html', allowed)).toBe(true);
    expect(isTrustedRendererUrl('file:///opt/Airlock/resources/app.asar/out/renderer/index.html#x', allowed)).toBe(true);
  });
  it('refuses other files, other origins and garbage', () => {
    expect(isTrustedRendererUrl('file:///tmp/evil.html', allowed)).toBe(false);
    expect(isTrustedRendererUrl('https://example.invalid/', allowed)).toBe(false);
    expect(isTrustedRendererUrl('http://localhost:5173/', allowed)).toBe(false);
    expect(isTrustedRendererUrl('not a url', allowed)).toBe(false);
    expect(isTrustedRendererUrl(undefined, allowed)).toBe(false);
  });
  it('accepts the dev server only when one is configured', () => {
    expect(isTrustedRendererUrl('http://localhost:5173/', { ...allowed, devServerUrl: 'http://localhost:5173' })).toBe(true);
    expect(isTrustedRendererUrl('http://localhost:5174/', { ...allowed, devServerUrl: 'http://localhost:5173' })).toBe(false);
  });
});
