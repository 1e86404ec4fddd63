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

  it('gives xterm one batch at a time; in a flood only the newest batch waits, behind a gap marker', () => {
    const t = slowTerminal();
    const sink = new TerminalSink(t.term, { intervalMs: 16, floodIntervalMs: 100, maxBacklogBytes: 1000, minBatchBytes: 800, maxBatchBytes: 800 });
    sink.write('a'.repeat(800));
    vi.advanceTimersByTime(16); // one batch in flight, the terminal has not parsed it
    for (let i = 0; i < 50; i++) sink.write(`${String(i).padStart(2, '0')}${'b'.repeat(98)}`); // 5000 more
    vi.advanceTimersByTime(200);
    expect(t.writes).toHaveLength(1); // nothing more is handed to xterm while it is parsing
    expect(sink.stats.droppedBytes).toBe(4200); // all but the newest batch (800 bytes)
    expect(sink.stats.gaps).toBe(1);
    t.release();
    vi.advanceTimersByTime(100);
    const second = t.writes[1] ?? '';
    // The marker first, then the newest output.
    expect(second).toMatch(/^\r\n.*4 KB of output skipped in the live view/);
    expect(second).toContain(`43${'b'.repeat(98)}`);
    expect(second).not.toContain(`41${'b'.repeat(98)}`);
    t.release();
    vi.advanceTimersByTime(100);
    t.release();
    expect(t.writes.slice(1).join('').endsWith(`49${'b'.repeat(98)}`)).toBe(true);
    vi.advanceTimersByTime(200);
    sink.write('after');
    vi.advanceTimersByTime(16);
    expect(t.writes.at(-1)).toBe('after');
  });

  it('sizes batches by how fast xterm parsed the last full one, within bounds', () => {
    const writes: number[] = [];
    let msPerKB = 1;
    // A terminal that takes msPerKB per KB to parse a batch.
    const term: TerminalLike = { write: (d, cb) => { writes.push(d.length); setTimeout(() => cb?.(), (d.length / 1024) * msPerKB); } };
    const sink = new TerminalSink(term, { intervalMs: 16, parseBudgetMs: 8, minBatchBytes: 4096, maxBatchBytes: 256 * 1024, maxBacklogBytes: 4 * 1024 * 1024 });
    // A steady flood: 16 KB every ms.
    const feed = (ms: number) => {
      const timer = setInterval(() => sink.write('x'.repeat(16 * 1024)), 1);
      vi.advanceTimersByTime(ms);
      clearInterval(timer);
    };
    feed(2000);
    // 1 ms per KB: 8 ms of parsing is 8 KB (after a first batch at the assumed speed), plus a gap marker.
    expect(Math.max(...writes.slice(2))).toBeGreaterThanOrEqual(8 * 1024);
    expect(Math.max(...writes.slice(2))).toBeLessThan(8 * 1024 + 200);
    msPerKB = 0.125;
    writes.length = 0;
    feed(2000);
    expect(Math.max(...writes.slice(2))).toBeGreaterThanOrEqual(64 * 1024);
    expect(Math.max(...writes.slice(2))).toBeLessThan(64 * 1024 + 200);
    msPerKB = 100;
    writes.length = 0;
    feed(20_000);
    expect(Math.min(...writes)).toBe(4096); // never below the floor
  });

  it('outside a flood keeps several batches, so a burst is drawn whole; past that it floods', () => {
    const t = slowTerminal();
    const sink = new TerminalSink(t.term, { intervalMs: 16, minBatchBytes: 1000, maxBatchBytes: 1000, maxBacklogBytes: 1024 * 1024 });
    sink.write('z');
    vi.advanceTimersByTime(16); // in flight
    for (let i = 0; i < 60; i++) sink.write('y'.repeat(100)); // 6000: within 8 batches
    expect(sink.stats.droppedBytes).toBe(0);
    for (let i = 0; i < 40; i++) sink.write('x'.repeat(100)); // 10000: over, a flood keeps one batch
    expect(sink.stats.droppedBytes).toBe(9000);
  });

  it('in a flood says it is idle only once per flood interval, pacing what the host sends', () => {
    const t = slowTerminal();
    const busy: boolean[] = [];
    const sink = new TerminalSink(t.term, { intervalMs: 16, floodIntervalMs: 100, flow: { setBusy: (_o, b) => busy.push(b) } });
    sink.gap(5000); // the host skipped output: a flood
    sink.write('newest');
    vi.advanceTimersByTime(16);
    t.release();
    expect(busy.at(-1)).toBe(true);
    vi.advanceTimersByTime(50);
    expect(busy.at(-1)).toBe(true);
    vi.advanceTimersByTime(50);
    expect(busy.at(-1)).toBe(false);
  });

  it('tells the flow while output waits or is parsed, and when it is all drawn', () => {
    const t = slowTerminal();
    const busy: boolean[] = [];
    const sink = new TerminalSink(t.term, { intervalMs: 16, flow: { setBusy: (_owner, b) => busy.push(b) } });
    sink.write('hello');
    expect(busy.at(-1)).toBe(true);
    vi.advanceTimersByTime(16);
    expect(busy.at(-1)).toBe(true); // xterm is parsing
    t.release();
    expect(busy.at(-1)).toBe(false);
    sink.write('again');
    sink.dispose();
    expect(busy.at(-1)).toBe(false);
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
    const sink = new TerminalSink(t.term, { intervalMs: 16, maxBacklogBytes: 100 });
    sink.write('z'.repeat(20));
    vi.advanceTimersByTime(16); // in flight
    sink.write('a'.repeat(60));
    sink.gap(2048);
    sink.write('b'.repeat(60));
    sink.write('c'.repeat(60));
    t.release();
    vi.advanceTimersByTime(100);
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
