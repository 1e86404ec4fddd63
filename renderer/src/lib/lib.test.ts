import { describe, expect, it } from 'vitest';
import type { ChangedFile, RunEvent } from '../../../contracts';
import { buildFileTree, defaultSelection, orderForReview } from './file-tree';
import { buildTranscript } from './transcript';
import { parseUnifiedDiff, toSplitRows } from './unified-diff';

const DIFF = `diff --git a/a.txt b/a.txt
--- a/a.txt
+++ b/a.txt
@@ -1,4 +1,4 @@
 one
-two
-three
+TWO
 four
@@ -10,2 +10,3 @@
 ten
+ten and a half
 eleven
\\ No newline at end of file
`;

describe('parseUnifiedDiff / toSplitRows', () => {
  it('numbers lines from the hunk headers', () => {
    const hunks = parseUnifiedDiff(DIFF);
    expect(hunks).toHaveLength(2);
    expect(hunks[0]?.lines.map((l) => [l.kind, l.oldNo, l.newNo, l.text])).toEqual([
      ['context', 1, 1, 'one'],
      ['del', 2, undefined, 'two'],
      ['del', 3, undefined, 'three'],
      ['add', undefined, 2, 'TWO'],
      ['context', 4, 3, 'four'],
    ]);
    expect(hunks[1]?.lines.at(-1)?.kind).toBe('meta');
  });

  it('pairs deletions with additions side by side', () => {
    const rows = toSplitRows(parseUnifiedDiff(DIFF)[0]!);
    expect(rows.map((r) => [r.left?.text, r.right?.text])).toEqual([
      ['one', 'one'],
      ['two', 'TWO'],
      ['three', undefined],
      ['four', 'four'],
    ]);
  });
});

const ev = (seq: number, event: RunEvent['event']): RunEvent => ({ runId: 'r-1-00000000', seq, at: '2026-01-01T00:00:00Z', event });

describe('buildTranscript', () => {
  it('joins text deltas, pairs tools and commands with their outcome, leaves output to the terminal', () => {
    const items = buildTranscript([
      ev(0, { type: 'status', status: 'running' }),
      ev(1, { type: 'assistant_text', delta: 'Hel' }),
      ev(2, { type: 'assistant_text', delta: 'lo' }),
      ev(3, { type: 'tool_call', id: 't1', name: 'read_file', input: { path: 'a' } }),
      ev(4, { type: 'tool_result', id: 't1', ok: true, output: 'content' }),
      ev(5, { type: 'command_started', id: 'c1', command: 'ls', cwd: '/w' }),
      ev(6, { type: 'command_output', id: 'c1', stream: 'stdout', data: 'file\n' }),
      ev(7, { type: 'command_exited', id: 'c1', exitCode: 0, durationMs: 12, timedOut: false }),
      ev(8, { type: 'approval_request', id: 'a1', command: 'rm x' }),
      ev(9, { type: 'approval_response', id: 'a1', approved: false }),
      ev(10, { type: 'finished', summary: 'done' }),
    ]);
    expect(items.map((i) => i.kind)).toEqual(['status', 'text', 'tool', 'command', 'approval', 'finished']);
    expect(items[1]).toMatchObject({ text: 'Hello' });
    expect(items[2]).toMatchObject({ name: 'read_file', ok: true, output: 'content' });
    expect(items[3]).toMatchObject({ command: 'ls', exitCode: 0 });
    expect(items[4]).toMatchObject({ approved: false });
    expect(JSON.stringify(items)).not.toContain('file\\n');
  });

  it('a command that ran and exited 1 is its exit, not a failed call; a call shows the path or command it names', () => {
    const items = buildTranscript([
      ev(0, { type: 'tool_call', id: 'c1', name: 'run_command', input: { command: 'npm test' } }),
      ev(1, { type: 'command_started', id: 'c1', command: 'npm test', cwd: '/w' }),
      ev(2, { type: 'command_exited', id: 'c1', exitCode: 1, durationMs: 5, timedOut: false }),
      ev(3, { type: 'tool_result', id: 'c1', ok: false, output: 'exit code 1' }),
      ev(4, { type: 'tool_call', id: 'w1', name: 'Write', input: { file_path: 'src/a.ts', content: 'x' } }),
      ev(5, { type: 'tool_result', id: 'w1', ok: false, output: 'EACCES' }),
    ]);
    expect(items[0]).toMatchObject({ kind: 'tool', target: 'npm test', ran: { exitCode: 1 }, ok: false });
    // The command the call ran is shown once, on the call (it used to be listed twice).
    expect(items.filter((i) => i.kind === 'command')).toEqual([]);
    // A call that never ran a command keeps its failure.
    expect(items[1]).toMatchObject({ kind: 'tool', target: 'src/a.ts', ok: false });
    expect(items[1]).not.toHaveProperty('ran');
  });
});

const file = (path: string, risky?: string): ChangedFile => ({ path, status: 'modified', binary: false, additions: 1, deletions: 0, ...(risky ? { risky } : {}) });

describe('file tree and review order', () => {
  it('nests files under folders, folders first', () => {
    const tree = buildFileTree([file('z.txt'), file('src/b.ts'), file('src/a.ts'), file('src/lib/c.ts')]);
    expect(tree.children.map((c) => c.name)).toEqual(['src', 'z.txt']);
    expect(tree.children[0]?.children.map((c) => c.name)).toEqual(['lib', 'a.ts', 'b.ts']);
  });

  it('puts risky files first and does not pre-select them', () => {
    const files = [file('src/a.ts'), file('.github/workflows/ci.yml', 'CI workflow'), file('package.json', 'lifecycle script')];
    expect(orderForReview(files).map((f) => f.path)).toEqual(['.github/workflows/ci.yml', 'package.json', 'src/a.ts']);
    expect([...defaultSelection(files)]).toEqual(['src/a.ts']);
  });
});
