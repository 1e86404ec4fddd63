import { describe, expect, it } from 'vitest';
import { Slots, defaultAttemptConcurrency } from './attempt-slots';

describe('attempt slots', () => {
  it('hands out at most `limit` at once, the rest in order as slots free up', async () => {
    const slots = new Slots(2);
    const order: number[] = [];
    const held = await Promise.all([slots.acquire(), slots.acquire()]);
    const third = slots.acquire().then((d) => (order.push(3), d));
    const fourth = slots.acquire().then((d) => (order.push(4), d));
    expect(slots.state).toEqual({ held: 2, waiting: 2 });
    held[0]?.dispose();
    held[0]?.dispose(); // twice frees once
    await third;
    expect(order).toEqual([3]);
    expect(slots.state).toEqual({ held: 2, waiting: 1 });
    held[1]?.dispose();
    (await fourth).dispose();
    expect(order).toEqual([3, 4]);
    expect(slots.state).toEqual({ held: 1, waiting: 0 });
  });

  it('defaults from cores and memory: bounded by both, at least one', () => {
    expect(defaultAttemptConcurrency(2, 16 * 1024 ** 3)).toBe(2);
    expect(defaultAttemptConcurrency(16, 4 * 1024 ** 3)).toBe(2);
    expect(defaultAttemptConcurrency(1, 512 * 1024 ** 2)).toBe(1);
    expect(defaultAttemptConcurrency(64, 512 * 1024 ** 3)).toBe(8);
  });
});
