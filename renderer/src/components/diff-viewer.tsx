import { useEffect, useMemo, useState, type ReactElement } from 'react';
import type { FileDiff } from '../../../contracts';
import { formatBytes } from '../lib/format';
import { hunkAnchor, lineAnchor, type CommentAnchor } from '../lib/review-comments';
import { hunkIds, lineId } from '../lib/selection';
import { countLines, parseUnifiedDiff, toSplitRows, type DiffLine } from '../lib/unified-diff';
import { diffKey, scopeArgs, useDiffStore, type ViewScope } from '../stores/diff-store';
import { ImageDiff, isImagePath } from './image-diff';

/** Past this many lines a diff is cut until the user asks for all of it. */
export const MAX_RENDERED_LINES = 3000;

function kindClass(line?: DiffLine): string {
  return line?.kind === 'add' ? 'add' : line?.kind === 'del' ? 'del' : '';
}

function Cell({ line, side, off }: { line?: DiffLine; side: 'old' | 'new'; off?: boolean }) {
  const no = side === 'old' ? line?.oldNo : line?.newNo;
  const cls = `${kindClass(line)}${off ? ' unpicked' : ''}`;
  return (
    <>
      <td className={`ln ${cls}`}>{no ?? ''}</td>
      <td className={cls}>{line ? line.text : ''}</td>
    </>
  );
}

/** Hunk and line picking in a diff: the ids picked (undefined: all) and how to change them. */
export interface DiffPick {
  picked?: ReadonlySet<string>;
  /** Turns these change ids on or off. */
  set(ids: string[], on: boolean): void;
}

/** Comments to the agent in a diff (Review): where one can be opened, and where one is kept. */
export interface DiffComments {
  open(anchor: CommentAnchor): void;
  has(anchor: CommentAnchor): boolean;
}

function CommentButton({ anchor, label, comments }: { anchor: CommentAnchor; label: string; comments: DiffComments }) {
  const kept = comments.has(anchor);
  return <button type="button" className={`comment-btn${kept ? ' kept' : ''}`} aria-label={`comment on ${label}`} title={kept ? 'Edit your comment' : 'Comment for the agent'} onClick={() => comments.open(anchor)}>{kept ? '●' : '+'}</button>;
}

/** A checkbox that shows "some" as indeterminate. */
function PickBox({ state, label, onChange }: { state: 'all' | 'some' | 'none'; label: string; onChange(on: boolean): void }) {
  return (
    <input
      type="checkbox"
      className="pick"
      aria-label={label}
      checked={state === 'all'}
      ref={(el) => { if (el) el.indeterminate = state === 'some'; }}
      onChange={(e) => onChange(e.target.checked)}
    />
  );
}

export function DiffBody({ diff, mode, pick, comments }: { diff: FileDiff; mode: 'unified' | 'split'; pick?: DiffPick; comments?: DiffComments }) {
  const [showAll, setShowAll] = useState(false);
  const hunks = useMemo(() => parseUnifiedDiff(diff.diff), [diff.diff]);
  if (diff.binary) {
    return <div className="empty">Binary file {diff.status}{diff.oldSize !== undefined || diff.newSize !== undefined ? ` (${formatBytes(diff.oldSize ?? 0)} → ${formatBytes(diff.newSize ?? 0)})` : ''}. No text diff to show.</div>;
  }
  if (diff.tooLarge) {
    return <div className="empty">This file is too large to show here{diff.newSize ? ` (${formatBytes(diff.newSize)})` : ''}. It is included in the patch; export it to inspect.</div>;
  }
  if (hunks.length === 0) return <div className="empty">No content changes{diff.status === 'renamed' ? ' (renamed)' : ''}.</div>;
  const total = countLines(hunks);
  let budget = showAll ? Number.POSITIVE_INFINITY : MAX_RENDERED_LINES;
  const rows: ReactElement[] = [];
  const isPicked = (id: string) => !pick?.picked || pick.picked.has(id);
  // Split: a pick column before each side (removals tick on the left, additions on the right).
  // Unified: a comment column after the text (changed lines only; split comments by hunk).
  const cols = mode === 'split' ? 4 + (pick ? 2 : 0) : 3 + (pick ? 1 : 0) + (comments ? 1 : 0);
  /** The checkbox cell of one side of a split row: only a removal (left) or an addition (right) has one. */
  const sidePick = (line: DiffLine | undefined, side: 'old' | 'new') => {
    const id = line && line.kind === (side === 'old' ? 'del' : 'add') ? lineId(line) : undefined;
    return (
      <td className={`pick-cell ${id ? kindClass(line) : ''}`}>
        {pick && id !== undefined && <PickBox state={isPicked(id) ? 'all' : 'none'} label={`line ${id}`} onChange={(v) => pick.set([id], v)} />}
      </td>
    );
  };
  for (const [hi, h] of hunks.entries()) {
    if (budget <= 0) break;
    const ids = hunkIds(h);
    const on = ids.filter(isPicked).length;
    rows.push(
      <tr className="hunk" key={`h${hi}`} data-hunk={hi}>
        {pick && <td className="pick-cell"><PickBox state={on === ids.length ? 'all' : on ? 'some' : 'none'} label={`hunk ${hi + 1}`} onChange={(v) => pick.set(ids, v)} /></td>}
        <td colSpan={cols - (pick ? 1 : 0)}>{(pick || comments) && <span className="hunk-no">hunk {hi + 1}</span>}{h.header}{comments && <CommentButton anchor={hunkAnchor(h, hi)} label={`hunk ${hi + 1}`} comments={comments} />}</td>
      </tr>,
    );
    if (mode === 'unified') {
      for (const [li, l] of h.lines.slice(0, budget).entries()) {
        const cls = l.kind === 'add' ? 'add' : l.kind === 'del' ? 'del' : '';
        const id = lineId(l);
        const off = id !== undefined && !isPicked(id);
        rows.push(
          <tr key={`${hi}-${li}`} className={off ? 'unpicked' : undefined} data-line={id}>
            {pick && <td className={`pick-cell ${cls}`}>{id !== undefined && <PickBox state={off ? 'none' : 'all'} label={`line ${id}`} onChange={(v) => pick.set([id], v)} />}</td>}
            <td className={`ln ${cls}`}>{l.oldNo ?? ''}</td>
            <td className={`ln ${cls}`}>{l.newNo ?? ''}</td>
            <td className={cls}>{l.kind === 'add' ? '+' : l.kind === 'del' ? '-' : ' '}{l.text}</td>
            {comments && <td className="comment-cell">{id !== undefined && <CommentButton anchor={lineAnchor(l)!} label={`line ${id}`} comments={comments} />}</td>}
          </tr>,
        );
      }
    } else {
      // The same ids as the unified layout (lineId), so the same ticks make the same selection (docs/architecture.md §11).
      for (const [ri, r] of toSplitRows(h).slice(0, budget).entries()) {
        const leftId = r.left?.kind === 'del' ? lineId(r.left) : undefined;
        const rightId = r.right?.kind === 'add' ? lineId(r.right) : undefined;
        rows.push(
          <tr key={`${hi}-${ri}`} data-left={leftId} data-right={rightId}>
            {pick && sidePick(r.left, 'old')}
            <Cell line={r.left} side="old" off={leftId !== undefined && !isPicked(leftId)} />
            {pick && sidePick(r.right, 'new')}
            <Cell line={r.right} side="new" off={rightId !== undefined && !isPicked(rightId)} />
          </tr>,
        );
      }
    }
    budget -= h.lines.length;
  }
  return (
    <>
      <table><tbody>{rows}</tbody></table>
      {total > MAX_RENDERED_LINES && !showAll && (
        <div className="empty">Showing {MAX_RENDERED_LINES} of {total} lines. <button className="btn small" onClick={() => setShowAll(true)}>Show all</button></div>
      )}
    </>
  );
}

/**
 * Loads and shows one file's diff, unified or side by side. With `pick`, hunks and changed lines get
 * checkboxes, when the host says this file's parts can be picked: in the split layout a removed line
 * is ticked in the left column and an added one in the right, with the same ids as unified.
 */
export function DiffViewer({ runId, path, scope, pick, comments }: { runId: string; path?: string; scope?: ViewScope; pick?: DiffPick; comments?: DiffComments }) {
  const entry = useDiffStore((s) => (path ? s.diffs[diffKey(runId, path, scope)] : undefined));
  const [mode, setMode] = useState<'unified' | 'split'>('unified');
  useEffect(() => {
    if (path) void useDiffStore.getState().loadFile(runId, path, scope);
  }, [runId, path, scope]);
  if (!path) return <div className="empty">Select a file to see its diff.</div>;
  // Unified and split are layouts of text lines: an image or a binary has none.
  const hasLines = !isImagePath(path) && entry !== undefined && !('error' in entry) && !entry.binary && entry.diff !== '';
  return (
    <div className="stack" style={{ minHeight: 0, flex: 1 }}>
      <div className="row spread">
        <span className="mono">{path}</span>
        {hasLines && (
          <div className="row" role="radiogroup" aria-label="Diff layout">
            <button className="btn small" aria-pressed={mode === 'unified'} onClick={() => setMode('unified')}>Unified</button>
            <button className="btn small" aria-pressed={mode === 'split'} onClick={() => setMode('split')}>Split</button>
          </div>
        )}
      </div>
      {isImagePath(path) && <ImageDiff runId={runId} path={path} {...scopeArgs(scope)} />}
      <div className="diff" aria-label={`Diff of ${path}`}>
        {!entry && <div className="empty">Loading…</div>}
        {entry && 'error' in entry && <div className="empty del-n">{entry.error}</div>}
        {entry && !('error' in entry) && pick && entry.wholeFileOnly && entry.diff && <div className="muted whole-only" role="note">Whole file only: {entry.wholeFileOnly}.</div>}
        {entry && !('error' in entry) && <DiffBody diff={entry} mode={mode} {...(pick && !entry.wholeFileOnly ? { pick } : {})} {...(comments ? { comments } : {})} />}
      </div>
    </div>
  );
}
