import { describe, expect, it } from 'vitest';
import { anchorKey, anchorLabel, hunkAnchor, lineAnchor, revisionTask, type ReviewComment } from './review-comments';
import { parseUnifiedDiff } from './unified-diff';

const DIFF = '--- a/src/a.txt\n+++ b/src/a.txt\n@@ -1,3 +1,3 @@ fn\n one\n-two\n+TWO\n three\n';

describe('review comments to the agent', () => {
  const [hunk] = parseUnifiedDiff(DIFF);
  const added = lineAnchor(hunk!.lines.find((l) => l.kind === 'add')!)!;
  const removed = lineAnchor(hunk!.lines.find((l) => l.kind === 'del')!)!;

  it('anchors name the line as the agent left the file, a removed line as it was, a hunk by its header', () => {
    expect(anchorLabel(added)).toBe('line 2');
    expect(anchorLabel(removed)).toBe('removed line 2 (of the file before your change)');
    expect(anchorLabel(hunkAnchor(hunk!, 0))).toBe('hunk 1 (@@ -1,3 +1,3 @@)');
    expect(lineAnchor(hunk!.lines[0]!)).toBeUndefined();
    expect(anchorKey('src/a.txt', added)).not.toBe(anchorKey('src/a.txt', removed));
  });

  it('the follow-up task quotes every comment at its file and line, a rejected hunk first', () => {
    const comments: ReviewComment[] = [
      { id: '1', path: 'src/a.txt', anchor: added, body: 'use lower case', rejected: false },
      { id: '2', path: 'src/b.txt', anchor: { kind: 'line', line: '+7', text: 'has `ticks`' }, body: 'why?', rejected: false },
      { id: '3', path: 'src/a.txt', anchor: hunkAnchor(hunk!, 0), body: '', rejected: true },
    ];
    const task = revisionTask(comments);
    expect(task).toContain('src/a.txt:\n- hunk 1 (@@ -1,3 +1,3 @@): REJECTED — undo this hunk.\n- line 2 `TWO`: use lower case');
    expect(task).toContain('src/b.txt:\n- line 7 "has `ticks`": why?');
    expect(task.startsWith('Revise your change according to my review.')).toBe(true);
  });
});
