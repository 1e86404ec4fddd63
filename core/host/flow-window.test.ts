import { describe, expect, it } from 'vitest';
import { FlowWindow } from './flow-window';

describe('FlowWindow', () => {
  it('is full past the window of unacknowledged output, and makes room on an ack', () => {
    const w = new FlowWindow(100);
    w.sent(100);
    expect(w.full).toBe(false);
    w.sent(1);
    expect(w.full).toBe(true);
    expect(w.ack(50)).toBe(true);
    expect(w.full).toBe(false);
  });

  it('takes running totals: a late, repeated or inflated ack changes nothing it should not', () => {
    const w = new FlowWindow(10);
    w.sent(30);
    expect(w.ack(25)).toBe(true);
    expect(w.ack(20)).toBe(false); // late
    expect(w.ack(25)).toBe(false); // repeated
    expect(w.ack(1_000)).toBe(true); // never more than was sent
    w.sent(11);
    expect(w.full).toBe(true);
  });
});
