import { describe, expect, it } from 'vitest';
import { headAndTail, workspacePath } from './mcp-limits';

describe('workspacePath', () => {
  it('takes relative paths from /workspace and absolute ones under it', () => {
    expect(workspacePath('src/a.ts')).toBe('/workspace/src/a.ts');
    expect(workspacePath('/workspace/src/../b')).toBe('/workspace/b');
    expect(workspacePath('.')).toBe('/workspace');
    expect(workspacePath('src\\win\\path')).toBe('/workspace/src/win/path');
  });
  it('refuses anything that leads out of the workspace, saying so', () => {
    for (const p of ['..', '../etc/passwd', '/etc/passwd', '/workspace-other/x', 'a/../../x', '/']) {
      expect(() => workspacePath(p), p).toThrow(/outside the workspace/);
    }
    expect(() => workspacePath('a\0b')).toThrow(/NUL/);
  });
});

describe('headAndTail', () => {
  it('keeps text within the cap whole, and cuts a longer one to its first and last half, saying where the rest is', () => {
    expect(headAndTail('short', 100, 'x')).toEqual({ text: 'short', cut: false });
    const long = `${'a'.repeat(500)}MIDDLE${'z'.repeat(500)}`;
    const r = headAndTail(long, 100, 'see airlock://runs/r/output/1/stdout');
    expect(r.cut).toBe(true);
    expect(r.text.startsWith('a'.repeat(50))).toBe(true);
    expect(r.text.endsWith('z'.repeat(50))).toBe(true);
    expect(r.text).not.toContain('MIDDLE');
    expect(r.text).toContain('906 bytes left out here; see airlock://runs/r/output/1/stdout');
  });
  it('never splits a character', () => {
    const r = headAndTail('é'.repeat(200), 101, 'x');
    expect(r.text).not.toContain('\uFFFD');
  });
});
