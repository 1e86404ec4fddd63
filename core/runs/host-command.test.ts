import { describe, expect, it, vi } from 'vitest';
import { execFileSync } from 'node:child_process';
import { CommandOutput, commandArgv } from './host-command';

const TOKEN = Buffer.from('airlock-run-token-0123456789abcdef');

function collect() {
  const out: Array<[string, string]> = [];
  const output = new CommandOutput([TOKEN], (stream, bytes) => out.push([stream, bytes.toString('utf8')]));
  return { out, output, text: (s: string) => out.filter(([k]) => k === s).map(([, v]) => v).join('') };
}

describe('CommandOutput (host-run command output on its way to the terminal)', () => {
  it('removes the run token even when it is cut across chunks', () => {
    const { output, text } = collect();
    const line = Buffer.from(`key=${TOKEN.toString()} done\n`);
    for (let i = 0; i < line.length; i += 5) output.push('stdout', line.subarray(i, i + 5));
    output.end();
    expect(text('stdout')).not.toContain(TOKEN.toString());
    expect(text('stdout')).toMatch(/^key=.*done\n$/);
  });

  it('hands on whole characters only, and keeps the two streams in order', () => {
    const { output, out } = collect();
    const euro = Buffer.from('€');
    output.push('stdout', Buffer.concat([Buffer.from('a'), euro.subarray(0, 1)]));
    output.push('stderr', Buffer.from('err\n'));
    output.push('stdout', euro.subarray(1));
    output.end();
    expect(out.map(([s]) => s)).toEqual(['stdout', 'stderr', 'stdout']);
    expect(out.map(([, t]) => t).join('')).toBe('aerr\n€');
    for (const [, t] of out) expect(t).not.toContain('\ufffd');
  });

  it('gathers a burst into one batch and hands it on without waiting for the end', async () => {
    const { output, out } = collect();
    for (let i = 0; i < 10; i++) output.push('stdout', Buffer.from(`line ${i}\n`));
    expect(out).toEqual([]);
    await vi.waitFor(() => expect(out.length).toBeGreaterThan(0));
    expect(out.map(([, t]) => t).join('')).toContain('line 9\n');
    output.end();
  });
});

describe("commandArgv (the agent's command line)", () => {
  it("puts the environment's PATH back after the login profile, quoted whatever it holds", () => {
    expect(commandArgv('ls', true, undefined)).toEqual(['bash', '-lc', 'ls']);
    expect(commandArgv('ls', false, '/x')).toEqual(['bash', '-c', 'ls']);
    const odd = "/opt/it's $(here)/bin:/usr/bin:/bin";
    const argv = commandArgv('printf %s "$PATH"', true, odd);
    // A real bash, with a profile that sets PATH outright as Debian's does.
    const out = execFileSync(argv[0] as string, ['--noprofile', '-c', `PATH=/usr/bin:/bin; ${argv[2]}`], { encoding: 'utf8' });
    expect(out).toBe(odd);
  });
});
