import { describe, expect, it } from 'vitest';
import { LOCKED_DOWN_PREFERENCES } from './web-preferences';
import { contentSecurityPolicy } from './csp';

describe('window lock-down', () => {
  it('isolates and sandboxes the renderer, with no Node and no webview', () => {
    expect(LOCKED_DOWN_PREFERENCES).toMatchObject({ contextIsolation: true, sandbox: true, nodeIntegration: false, webviewTag: false, webSecurity: true, allowRunningInsecureContent: false });
  });
  it('allows only own scripts in production', () => {
    const csp = contentSecurityPolicy(false);
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toMatch(/script-src[^;]*unsafe/);
    expect(csp).toContain("object-src 'none'");
  });
});
