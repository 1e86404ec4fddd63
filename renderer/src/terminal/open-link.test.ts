import { describe, expect, it } from 'vitest';
import { needsPreviewPorts, openExternalLink } from './open-link';

describe('openExternalLink', () => {
  const previews = [{ sandboxPort: 3000, hostPort: 41234 }];

  it('opens https links, normalised', () => {
    const opened: string[] = [];
    expect(openExternalLink('https://example.com', [], (u) => opened.push(u))).toBe(true);
    expect(opened).toEqual(['https://example.com/']);
  });

  // Issue 22, item 6: terminal links may open only this run's published ports, on the previews' site.
  it('opens a loopback link only for a published port of this run, as http://localhost:<host port>', () => {
    const opened: string[] = [];
    expect(openExternalLink('http://127.0.0.1:41234/app?x=1#h', previews, (u) => opened.push(u))).toBe(true);
    // A server in the sandbox prints its own port: the link goes to its published host port.
    expect(openExternalLink('http://localhost:3000/', previews, (u) => opened.push(u))).toBe(true);
    expect(opened).toEqual(['http://localhost:41234/app?x=1#h', 'http://localhost:41234/']);
    for (const raw of ['http://127.0.0.1:4321/', 'http://127.0.0.1:41235/', 'http://localhost:8080/', 'http://[::1]:22/', 'http://127.0.0.1:41234/'.replace('41234', '41233')]) {
      expect(openExternalLink(raw, previews, (u) => opened.push(u)), raw).toBe(false);
    }
    // Without published ports no loopback link opens at all.
    expect(openExternalLink('http://127.0.0.1:41234/', [], (u) => opened.push(u))).toBe(false);
    expect(opened).toHaveLength(2);
  });

  it('never opens javascript:, file: or data: links, other http hosts or links with credentials', () => {
    const opened: string[] = [];
    for (const raw of ['javascript:alert(1)', 'file:///etc/shadow', 'data:text/html,x', 'http://example.com:41234/', 'http://u:p@127.0.0.1:41234/', 'http://127.0.0.2:41234/']) {
      expect(openExternalLink(raw, previews, (u) => opened.push(u)), raw).toBe(false);
    }
    expect(opened).toEqual([]);
  });

  it('knows which links need the run\'s ports', () => {
    expect(needsPreviewPorts('http://127.0.0.1:1/')).toBe(true);
    expect(needsPreviewPorts('http://localhost:3000')).toBe(true);
    expect(needsPreviewPorts('https://example.com')).toBe(false);
  });
});
