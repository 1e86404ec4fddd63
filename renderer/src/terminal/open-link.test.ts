import { describe, expect, it } from 'vitest';
import { openExternalLink } from './open-link';

describe('openExternalLink', () => {
  it('opens an allowed link, normalised', () => {
    const opened: string[] = [];
    expect(openExternalLink('http://127.0.0.1:4321', (u) => opened.push(u))).toBe(true);
    expect(opened).toEqual(['http://127.0.0.1:4321/']);
  });

  it('never opens javascript:, file: or data: links', () => {
    const opened: string[] = [];
    for (const raw of ['javascript:alert(1)', 'file:///etc/shadow', 'data:text/html,x']) expect(openExternalLink(raw, (u) => opened.push(u))).toBe(false);
    expect(opened).toEqual([]);
  });
});
