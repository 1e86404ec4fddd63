import { describe, expect, it } from 'vitest';
import { workspacePath } from './mcp-limits';

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
