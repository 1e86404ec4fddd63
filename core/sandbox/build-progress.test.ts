import { describe, expect, it } from 'vitest';
import { BuildProgressParser } from './build-progress';
import type { ImageProgress } from './driver';

describe('BuildProgressParser', () => {
  it('reports steps and keeps the failing step output', () => {
    const events: ImageProgress[] = [];
    const p = new BuildProgressParser((e) => events.push(e), 'base');
    const lines = [
      { stream: 'Step 1/3 : FROM debian:bookworm-slim\n' },
      { stream: ' ---> a3899524ada0\n' },
      { stream: 'Step 2/3 : RUN apt-get install nope\n' },
      { stream: 'E: Unable to locate package nope\n' },
      { errorDetail: { code: 100, message: "The command '/bin/sh -c apt-get install nope' returned a non-zero code: 100" }, error: 'x' },
    ];
    const raw = lines.map((l) => JSON.stringify(l)).join('\r\n') + '\r\n';
    // Cut the stream at arbitrary points: the parser must reassemble lines.
    for (let i = 0; i < raw.length; i += 7) p.feed(raw.slice(i, i + 7));
    p.end();
    expect(p.step).toBe(2);
    expect(p.totalSteps).toBe(3);
    expect(p.error).toMatch(/non-zero code: 100/);
    expect(p.outputTail()).toBe('E: Unable to locate package nope');
    const steps = events.filter((e) => e.message.startsWith('step '));
    expect(steps.map((e) => [e.step, e.totalSteps])).toEqual([
      [1, 3],
      [2, 3],
    ]);
  });
});
