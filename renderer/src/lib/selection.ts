import type { FileSelection } from '../../../contracts';
import type { DiffLine, Hunk } from './unified-diff';

/**
 * Hunk and line picking (docs/architecture.md §11, "Picking hunks and lines"): a changed line's
 * id is `-<old line no>` for a removal and `+<new line no>` for an addition, as the host numbers
 * them; hunks are numbered from 0 in diff order. The UI keeps, per partly picked file, the set of
 * picked ids; the host renders the patch of exactly that.
 */
export function lineId(l: DiffLine): string | undefined {
  if (l.kind === 'add') return `+${l.newNo}`;
  if (l.kind === 'del') return `-${l.oldNo}`;
  return undefined;
}

/** The changed-line ids of one hunk. */
export function hunkIds(h: Hunk): string[] {
  return h.lines.map(lineId).filter((id): id is string => id !== undefined);
}

/**
 * What to send for a file given its picked ids: `whole` when every change is picked, `none` when
 * nothing is, else whole hunks by number and the rest by line.
 */
export function fileSelectionOf(path: string, hunks: Hunk[], picked: ReadonlySet<string>): FileSelection | 'whole' | 'none' {
  const all = hunks.flatMap(hunkIds);
  const taken = all.filter((id) => picked.has(id));
  if (taken.length === 0) return 'none';
  if (taken.length === all.length) return 'whole';
  const sel: FileSelection = { path };
  for (const [i, h] of hunks.entries()) {
    const ids = hunkIds(h);
    const on = ids.filter((id) => picked.has(id));
    if (on.length === ids.length && ids.length) sel.hunks = [...(sel.hunks ?? []), i];
    else if (on.length) sel.lines = [...(sel.lines ?? []), ...on];
  }
  return sel;
}
