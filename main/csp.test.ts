import { describe, expect, it } from 'vitest';
import { contentSecurityPolicy } from './csp';

describe('content security policy', () => {
  it('allows only own scripts in production', () => {
    const csp = contentSecurityPolicy(false);
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toMatch(/script-src[^;]*unsafe/);
    expect(csp).toContain("object-src 'none'");
  });
});
