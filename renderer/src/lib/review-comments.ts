/**
 * Review that talks back (docs/architecture.md §11, "Comments to the agent"): comments on a line or a hunk
 * of a run's change, a hunk rejected with a reason, and the follow-up task that quotes each at its file
 * and line. The follow-up starts from the reviewed result (a continue, §15), so its own change is what
 * changed since the comments.
 */
import type { DiffLine, Hunk } from './unified-diff';

/** Where a comment points: one changed line (its selection id, `+15` or `-3`) or a whole hunk. */
export type CommentAnchor =
  | { kind: 'line'; line: string; text: string }
  | { kind: 'hunk'; hunk: number; header: string };

export interface ReviewComment {
  id: string;
  path: string;
  anchor: CommentAnchor;
  body: string;
  /** A hunk the user rejects: left out of apply, and the agent is asked to take it back or redo it. */
  rejected: boolean;
}

/** Comments longer than this are cut: the task goes to the model as one message. */
export const MAX_COMMENT_CHARS = 4000;

export function lineAnchor(l: DiffLine): CommentAnchor | undefined {
  if (l.kind === 'add') return { kind: 'line', line: `+${l.newNo}`, text: l.text };
  if (l.kind === 'del') return { kind: 'line', line: `-${l.oldNo}`, text: l.text };
  return undefined;
}

export function hunkAnchor(h: Hunk, index: number): CommentAnchor {
  return { kind: 'hunk', hunk: index + 1, header: h.header };
}

/** "line 15", "removed line 3", "hunk 2 (@@ -14,3 +14,3 @@)": the words the task and the list use. */
export function anchorLabel(a: CommentAnchor): string {
  if (a.kind === 'hunk') return `hunk ${a.hunk} (${a.header.replace(/^(@@[^@]*@@).*$/, '$1')})`;
  return a.line.startsWith('+') ? `line ${a.line.slice(1)}` : `removed line ${a.line.slice(1)} (of the file before your change)`;
}

/** Same file and place: a second comment there replaces the first. */
export function anchorKey(path: string, a: CommentAnchor): string {
  return `${path}\0${a.kind === 'hunk' ? `h${a.hunk}` : a.line}`;
}

const quote = (text: string) => (text.includes('`') ? JSON.stringify(text) : `\`${text}\``);

/** The follow-up task: every comment at its file and line, rejections first within a file. */
export function revisionTask(comments: readonly ReviewComment[]): string {
  const byFile = new Map<string, ReviewComment[]>();
  for (const c of comments) byFile.set(c.path, [...(byFile.get(c.path) ?? []), c]);
  const out = ['Revise your change according to my review. Each comment names its file and where in your change it applies (line numbers are of the file as you left it; a removed line is numbered as it was before your change).', ''];
  for (const [path, list] of byFile) {
    out.push(`${path}:`);
    for (const c of [...list].sort((a, b) => Number(b.rejected) - Number(a.rejected))) {
      const where = anchorLabel(c.anchor) + (c.anchor.kind === 'line' ? ` ${quote(c.anchor.text.slice(0, 200))}` : '');
      const body = c.body.trim().slice(0, MAX_COMMENT_CHARS);
      out.push(c.rejected ? `- ${where}: REJECTED — undo this hunk${body ? `; ${body}` : '.'}` : `- ${where}: ${body}`);
    }
    out.push('');
  }
  return out.join('\n').trimEnd();
}
