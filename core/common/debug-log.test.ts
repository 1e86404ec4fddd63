import { describe, expect, it } from 'vitest';
import { DebugLog } from './debug-log';

describe('DebugLog (errors swallowed on purpose go somewhere)', () => {
  it('keeps the first line of each note, cut, in order, and tells listeners', async () => {
    const log = new DebugLog();
    const heard: string[] = [];
    const sub = log.onDidNote((n) => heard.push(n.where));
    log.note('sandbox.destroy', new Error('engine gone\nstack line that is not kept'));
    expect(await Promise.reject(new Error('x'.repeat(1000))).catch(log.swallow('run.audit.note'))).toBeUndefined();
    sub.dispose();
    log.note('after', 'plain string');
    const [first, second, third] = log.recent();
    expect(first).toMatchObject({ where: 'sandbox.destroy', message: 'engine gone' });
    expect(second?.message).toHaveLength(301);
    expect(third).toMatchObject({ where: 'after', message: 'plain string' });
    expect(heard).toEqual(['sandbox.destroy', 'run.audit.note']);
  });

  it('keeps only the last 500', () => {
    const log = new DebugLog();
    for (let i = 0; i < 600; i++) log.note(`n${i}`, 'e');
    const kept = log.recent();
    expect(kept).toHaveLength(500);
    expect(kept[0]?.where).toBe('n100');
    expect(log.recent(2).map((n) => n.where)).toEqual(['n598', 'n599']);
  });

  it('hands a stack to listeners whole and keeps it nowhere (stacks may hold paths)', () => {
    const log = new DebugLog();
    const heard: string[] = [];
    const sub = log.onDidStack((s) => heard.push(`${s.where}: ${s.stack}`));
    const err = new Error('boom');
    log.stack('run r1', err);
    log.stack('run r2', 'not an error');
    sub.dispose();
    expect(heard).toEqual([`run r1: ${err.stack}`, 'run r2: not an error']);
    expect(heard[0]).toContain('\n    at ');
    expect(log.recent()).toEqual([]);
  });
});
