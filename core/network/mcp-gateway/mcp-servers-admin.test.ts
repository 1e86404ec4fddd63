import { describe, expect, it } from 'vitest';
import { checkedSignInUrl } from './mcp-servers-admin';

describe('the sign-in page the host opens for an OAuth MCP server', () => {
  it('opens https and loopback http only; anything else from a server is refused, never opened', () => {
    expect(checkedSignInUrl(new URL('https://auth.example.com/authorize?x=1'))).toBe('https://auth.example.com/authorize?x=1');
    expect(checkedSignInUrl(new URL('http://127.0.0.1:8123/authorize'))).toBe('http://127.0.0.1:8123/authorize');
    expect(checkedSignInUrl(new URL('http://localhost:8123/authorize'))).toBe('http://localhost:8123/authorize');
    for (const bad of ['http://auth.example.com/authorize', 'javascript:alert(1)', 'file:///etc/passwd', 'smb://host/share', 'http://127.0.0.1.evil.example/authorize']) {
      expect(() => checkedSignInUrl(new URL(bad)), bad).toThrow(/not https/);
    }
  });
});
