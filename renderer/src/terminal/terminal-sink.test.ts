import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { TerminalSink, type TerminalLike } from './terminal-sink';

/** A terminal whose parse callbacks the test releases by hand (a slow UI). */
function slowTerminal() {
  const writes: string[] = [];
  const callbacks: Array<() => void> = [];
  const term: TerminalLike = { write: (d, cb) => { writes.push(d); if (cb) callbacks.push(cb); } };
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

  it('bounds the backlog of a slow terminal and marks the gap visibly', () => {
    const t = slowTerminal();
    const sink = new TerminalSink(t.term, { intervalMs: 16, maxBacklogChars: 1000 });
    sink.write('a'.repeat(800));
    vi.advanceTimersByTime(16); // 800 chars in flight, terminal has not parsed them
    for (let i = 0; i < 50; i++) sink.write('b'.repeat(100)); // 5000 more: only 200 fit
    vi.advanceTimersByTime(16);
    const second = t.writes[1] ?? '';
    expect(second.length).toBeLessThan(1000);
    expect(sink.stats.droppedChars).toBe(4800);
    // The marker sits where output was dropped: after the 200 chars that still fit.
    expect(second.startsWith('b'.repeat(200))).toBe(true);
    expect(second).toMatch(/5 KB of output skipped in the live view/);
    expect(sink.stats.gaps).toBe(1);
    t.release();
    sink.write('after');
    vi.advanceTimersByTime(16);
    expect(t.writes.at(-1)).toBe('after');
  });

  it('shows a gap the host reported', () => {
    const t = slowTerminal();
    const sink = new TerminalSink(t.term, { intervalMs: 16 });
    sink.gap(3 * 1024 * 1024);
    vi.advanceTimersByTime(16);
    expect(t.writes[0]).toContain('3.0 MB of output skipped');
  });
});
