import { describe, expect, it } from 'vitest';
import { externalLinkUrl } from './external-links';

describe('externalLinkUrl (the one rule for links the UI opens outside itself)', () => {
  const previews = [{ sandboxPort: 3000, hostPort: 5173 }];

  it('lets https pages and published preview ports through, on the previews\' site (localhost), normalised', () => {
    expect(externalLinkUrl('https://example.com/docs?q=1#a')).toBe('https://example.com/docs?q=1#a');
    expect(externalLinkUrl('http://127.0.0.1:5173', previews)).toBe('http://localhost:5173/');
    expect(externalLinkUrl('  http://localhost:3000/app  ', previews)).toBe('http://localhost:5173/app');
  });

  // Issue 22, item 6: any loopback port used to open.
  it('refuses loopback ports that are not published previews of a live run', () => {
    expect(externalLinkUrl('http://127.0.0.1:5173/')).toBeUndefined();
    expect(externalLinkUrl('http://127.0.0.1:5174/', previews)).toBeUndefined();
    expect(externalLinkUrl('http://app.localhost:5173/', previews)).toBeUndefined();
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
    expect(externalLinkUrl(raw, [{ sandboxPort: 8080, hostPort: 8081 }])).toBeUndefined();
  });
});
