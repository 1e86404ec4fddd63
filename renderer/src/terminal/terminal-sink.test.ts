import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { TerminalSink, type TerminalLike } from './terminal-sink';

/** A terminal whose parse callbacks the test releases by hand (a slow UI). */
function slowTerminal() {
  const writes: string[] = [];
  const callbacks: Array<() => void> = [];
  const term: TerminalLike = { write: (d, cb) => { writes.push(new TextDecoder().decode(d)); if (cb) callbacks.push(cb); } };
  return { term, writes, release: () => callbacks.splice(0).forEach((cb) => cb()) };
}

describe('TerminalSink', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('writes once per frame, however many chunks arrive', () => {
    const t = slowTerminal();
    const sink = new TerminalSink(t.term, { intervalMs: 16 });
    for (let i = 0; i < 100; i++) sink.write(`line ${i}\r\n`);
    expect(t.writes).toHaveLength(0);
    vi.advanceTimersByTime(16);
    expect(t.writes).toHaveLength(1);
    expect(t.writes[0]).toContain('line 0');
    expect(t.writes[0]).toContain('line 99');
  });

  it('bounds what a slow terminal has to parse, drops the oldest waiting output, and marks the gap', () => {
    const t = slowTerminal();
    const sink = new TerminalSink(t.term, { intervalMs: 16, maxBacklogBytes: 1000, maxInflightBytes: 500 });
    sink.write('a'.repeat(800));
    vi.advanceTimersByTime(16); // 800 chars in flight, the terminal has not parsed them
    for (let i = 0; i < 50; i++) sink.write(`${String(i).padStart(2, '0')}${'b'.repeat(98)}`); // 5000 more
    vi.advanceTimersByTime(16);
    expect(t.writes).toHaveLength(1); // nothing more is handed to xterm while it is behind
    expect(sink.stats.droppedBytes).toBe(4000);
    expect(sink.stats.gaps).toBe(1);
    t.release();
    vi.advanceTimersByTime(16);
    const second = t.writes[1] ?? '';
    // The marker first, then the newest output: the view shows where the flood is now.
    expect(second).toMatch(/^\r\n.*4 KB of output skipped in the live view/);
    expect(second.endsWith(`49${'b'.repeat(98)}`)).toBe(true);
    expect(second).toContain(`40${'b'.repeat(98)}`);
    expect(second).not.toContain(`39${'b'.repeat(98)}`);
    t.release();
    sink.write('after');
    vi.advanceTimersByTime(16);
    expect(t.writes.at(-1)).toBe('after');
  });

  it('keeps the tail of a single chunk larger than the bound', () => {
    const t = slowTerminal();
    const sink = new TerminalSink(t.term, { intervalMs: 16, maxBacklogBytes: 100 });
    sink.write(`${'x'.repeat(1000)}${'y'.repeat(100)}`);
    vi.advanceTimersByTime(16);
    expect(t.writes[0]).toMatch(/skipped in the live view.*\r\ny{100}$/s);
    expect(sink.stats.droppedBytes).toBe(1000);
  });

  it('merges a reported gap with output it drops into one marker', () => {
    const t = slowTerminal();
    const sink = new TerminalSink(t.term, { intervalMs: 16, maxBacklogBytes: 100, maxInflightBytes: 10 });
    sink.write('z'.repeat(20));
    vi.advanceTimersByTime(16); // in flight
    sink.write('a'.repeat(60));
    sink.gap(2048);
    sink.write('b'.repeat(60));
    sink.write('c'.repeat(60));
    t.release();
    vi.advanceTimersByTime(16);
    const second = t.writes[1] ?? '';
    expect(second.match(/skipped in the live view/g)).toHaveLength(1);
    expect(second).toMatch(/2 KB of output skipped/);
    expect(second).not.toContain('a');
    expect(second.endsWith('c'.repeat(60))).toBe(true);
    expect(sink.stats.gaps).toBe(1);
  });

  it('takes text and bytes alike, and a character split across writes comes out whole', () => {
    const t = slowTerminal();
    const sink = new TerminalSink(t.term, { intervalMs: 16 });
    const euro = new TextEncoder().encode('€');
    sink.write('price: ');
    sink.write(euro.subarray(0, 1));
    sink.write(euro.subarray(1));
    vi.advanceTimersByTime(16);
    expect(t.writes).toEqual(['price: €']);
    expect(sink.stats.receivedBytes).toBe(10);
  });

  it('shows a gap the host reported', () => {
    const t = slowTerminal();
    const sink = new TerminalSink(t.term, { intervalMs: 16 });
    sink.gap(3 * 1024 * 1024);
    vi.advanceTimersByTime(16);
    expect(t.writes[0]).toContain('3.0 MB of output skipped');
  });
});
