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

describe('build failures', () => {
  it('recognises a full disk as DISK_FULL and anything else as IMAGE_BUILD_FAILED', async () => {
    const { buildFailure } = await import('./image');
    const parse = (lines: object[]) => {
      const p = new BuildProgressParser(() => undefined, 'base');
      p.feed(lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
      return p;
    };
    const full = buildFailure(
      parse([{ stream: 'Step 3/9 : RUN apt-get install -y git\n' }, { stream: 'E: Write error - write (28: No space left on device)\n' }, { error: 'x', errorDetail: { message: 'returned a non-zero code: 100' } }]),
    );
    expect(full.kind).toBe('DISK_FULL');
    expect(full.message).toMatch(/docker system prune/);
    const other = buildFailure(parse([{ stream: 'Step 8/9 : RUN npm install node-pty@1\n' }, { stream: 'npm ERR! code E404\n' }, { error: 'x', errorDetail: { message: 'returned a non-zero code: 1' } }]));
    expect(other.kind).toBe('IMAGE_BUILD_FAILED');
    expect(other.message).toMatch(/step 8\/9 \(RUN npm install node-pty@1\)/);
    expect(other.message).toMatch(/npm ERR! code E404/);
  });
});
