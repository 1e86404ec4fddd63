import { afterEach, describe, expect, it } from 'vitest';
import { untilSignal } from './serve';

describe('serve: stopping on a signal', () => {
  const handles: Array<{ done(): void }> = [];
  afterEach(() => {
    for (const h of handles.splice(0)) h.done();
  });

  it('stops on the first interrupt and answers a second one during cleanup instead of dying', async () => {
    let err = '';
    const before = process.listenerCount('SIGINT');
    const stop = untilSignal({ write: (s: string) => ((err += s), true) });
    handles.push(stop);
    // process.emit runs exactly the handlers a delivered signal would, without signalling the test runner.
    process.emit('SIGINT', 'SIGINT');
    await stop.stopped;
    expect(err).toBe('Stopping: removing sandboxes…\n');
    process.emit('SIGINT', 'SIGINT');
    process.emit('SIGTERM', 'SIGTERM');
    expect(err.match(/Still cleaning up/g)).toHaveLength(2);
    // While cleaning up, the handler stays installed: without it Node's default action would kill us.
    expect(process.listenerCount('SIGINT')).toBe(before + 1);
    stop.done();
    expect(process.listenerCount('SIGINT')).toBe(before);
    expect(process.listenerCount('SIGHUP')).toBe(0);
  });
});
