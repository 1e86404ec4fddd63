import { describe, expect, it } from 'vitest';
import { OutputCapture } from './output-capture';

describe('OutputCapture', () => {
  it('keeps all of a short output', () => {
    const c = new OutputCapture(100);
    c.add(Buffer.from('hello '));
    c.add(Buffer.from('world'));
    expect(c.truncated).toBe(false);
    expect(c.text()).toBe('hello world');
    expect(c.bytes).toBe(11);
  });

  it('keeps the head and the tail of a long output, says what was cut, and stays bounded', () => {
    const c = new OutputCapture(1000);
    const lines = Array.from({ length: 20000 }, (_, i) => `${i + 1}\n`).join('');
    const bytes = Buffer.from(lines);
    for (let i = 0; i < bytes.length; i += 777) c.add(bytes.subarray(i, i + 777));
    expect(c.truncated).toBe(true);
    expect(c.bytes).toBe(bytes.length);
    const text = c.text();
    expect(text.startsWith('1\n2\n3\n')).toBe(true);
    expect(text).toContain(`[${bytes.length} bytes of output; middle cut]`);
    expect(text.endsWith('19999\n20000\n')).toBe(true);
    expect(text).not.toContain('\n10000\n');
    expect(text.length).toBeLessThan(1200);
  });
});
