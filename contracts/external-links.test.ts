import { describe, expect, it } from 'vitest';
import { externalLinkUrl } from './external-links';

describe('externalLinkUrl (the one rule for links the UI opens outside itself)', () => {
  it('lets https pages and loopback preview ports through, normalised', () => {
    expect(externalLinkUrl('https://example.com/docs?q=1#a')).toBe('https://example.com/docs?q=1#a');
    expect(externalLinkUrl('http://127.0.0.1:5173')).toBe('http://127.0.0.1:5173/');
    expect(externalLinkUrl('  http://127.0.0.1:3000/app  ')).toBe('http://127.0.0.1:3000/app');
  });

  it.each([
    'javascript:alert(1)',
    'JavaScript:alert(document.domain)',
    ' javascript:alert(1)',
    'file:///etc/passwd',
    'data:text/html,<script>alert(1)</script>',
    'vbscript:msgbox(1)',
    'about:blank',
    'ftp://example.com/',
    'http://example.com/',
    'http://localhost:3000/',
    'http://127.0.0.1/',
    'http://10.0.0.1:8080/',
    'https://user:pass@example.com/',
    'https://example.com@evil.invalid/',
    'not a url',
    '',
  ])('refuses %j', (raw) => {
    expect(externalLinkUrl(raw)).toBeUndefined();
  });
});
