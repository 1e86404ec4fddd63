import { describe, expect, it } from 'vitest';
import type { FileChange } from '../workspace/changes';
import { toChangedFile } from './run-record';

const change = (over: Partial<FileChange>): FileChange => ({
  path: 'x',
  status: 'modified',
  binary: false,
  additions: 0,
  deletions: 0,
  size: 1,
  oldSize: 1,
  modeChanged: false,
  tooLarge: false,
  oldOid: 'a',
  newOid: 'b',
  ...over,
});

describe('toChangedFile (the one changed-file shape)', () => {
  it('reports a file that became a symlink, or back, as type-changed', () => {
    expect(toChangedFile(change({ oldMode: '100644', newMode: '120000', modeChanged: true }))).toMatchObject({ status: 'type-changed', modeChange: '100644 → 120000' });
    expect(toChangedFile(change({ oldMode: '120000', newMode: '100755', modeChanged: true })).status).toBe('type-changed');
  });
  it('keeps an executable-bit flip a modification with its mode change, and carries the risky reason', () => {
    expect(toChangedFile(change({ oldMode: '100644', newMode: '100755', modeChanged: true }), 'git hook')).toEqual({ path: 'x', status: 'modified', binary: false, additions: 0, deletions: 0, modeChange: '100644 → 100755', risky: 'git hook' });
    expect(toChangedFile(change({ status: 'renamed', oldPath: 'w' }))).toEqual({ path: 'x', oldPath: 'w', status: 'renamed', binary: false, additions: 0, deletions: 0 });
  });
});
