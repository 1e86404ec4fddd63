import { AirlockError } from '../../contracts/errors';
import { sectionsOf, selectChanges, type ResultChange, type StoredResult } from './collect';
import { blobOid, ZERO_OID } from './git-objects';
import type { HostRepo } from './host-repo';
import { sha256Hex } from '../common/sha256';

/**
 * Part of one changed text file: hunks (0-based, in the order of the file's section of the result
 * patch) and/or changed lines, `-<old line no>` for a removed line and `+<new line no>` for an
 * added one (the numbers the diff shows). Everything not named stays as in the base.
 */
export interface FileSelection {
  path: string;
  hunks?: number[];
  lines?: string[];
}

/** A selection of a result: files (whole) and the parts of some of them, rendered on the host. */
export interface SelectionPatch {
  /** The changes selected, in result order. */
  changes: ResultChange[];
  /** The patch of the selection: whole sections for whole files, re-rendered ones for parts. */
  patch: Buffer;
  sha256: string;
  /** New content of each partly selected file (base plus only the selected changes). */
  partial: Map<string, Buffer>;
}

export interface PatchLine {
  kind: ' ' | '+' | '-';
  text: string;
  /** False when git marked the line `\ No newline at end of file`. */
  eol: boolean;
  id?: string;
}

export interface PatchHunk {
  /** The hunk's header as git wrote it. */
  header: string;
  oldStart: number;
  /** What follows the second `@@` of the header (git's function context). */
  tail: string;
  lines: PatchLine[];
}

/** Why a change can only be taken whole, or undefined when its hunks and lines can be picked. */
export function wholeFileOnly(c: Pick<ResultChange, 'status' | 'binary' | 'oldMode' | 'newMode' | 'tooLarge'>): string | undefined {
  if (c.binary) return 'a binary file is applied whole';
  if (c.tooLarge) return 'a file too large to show is applied whole';
  if (c.status === 'renamed') return 'a rename is applied whole';
  if (c.status === 'deleted') return 'a deletion is applied whole';
  if (c.oldMode === '120000' || c.newMode === '120000') return 'a symlink is applied whole';
  return undefined;
}

/**
 * The patch and contents of a selection of a run's result, all derived on the host: the file's
 * section of the host's result patch gives the hunks, the base blob from the run's object store
 * is checked against every context and removed line, and the new content is the base plus only
 * the selected changes. A partly selected file's section is re-rendered the way `git apply`
 * reads a hand-edited patch (unselected additions dropped, unselected removals kept as context,
 * hunk headers recounted); a whole file keeps its section byte for byte, so selecting everything
 * renders the result patch itself.
 */
export async function selectionPatch(repo: HostRepo, result: StoredResult, patch: Buffer, files?: string[], parts: FileSelection[] = []): Promise<SelectionPatch> {
  const changes = selectChanges(result, files);
  const byPath = new Map<string, FileSelection>();
  for (const part of parts) {
    if (byPath.has(part.path)) throw new AirlockError('INVALID_INPUT', `${part.path} is selected twice; name each file once.`);
    const change = changes.find((c) => c.path === part.path);
    if (!change) throw new AirlockError('INVALID_INPUT', `${part.path} is not among the selected changed files; select the file, then its hunks or lines.`);
    const why = wholeFileOnly(change);
    if (why) throw new AirlockError('INVALID_INPUT', `${part.path}: ${why}; its hunks and lines cannot be picked.`);
    byPath.set(part.path, part);
  }
  const bases = await repo.readBlobs([...byPath.keys()].map((p) => changes.find((c) => c.path === p)?.oldOid as string).filter((o) => o !== ZERO_OID));
  const partial = new Map<string, Buffer>();
  const pieces: Buffer[] = [];
  for (const c of changes) {
    const whole = sectionsOf(patch, [c]);
    const part = byPath.get(c.path);
    if (!part) {
      pieces.push(whole);
      continue;
    }
    const rendered = renderPart(c, whole, c.oldOid === ZERO_OID ? Buffer.alloc(0) : (bases.get(c.oldOid) as Buffer), part);
    partial.set(c.path, rendered.content);
    pieces.push(rendered.section);
  }
  const out = Buffer.concat(pieces);
  return { changes, patch: out, sha256: sha256Hex(out), partial };
}

/** Splits `text` into lines keeping whether each ended with a newline. */
function linesOf(text: string): Array<{ text: string; eol: boolean }> {
  if (!text) return [];
  const parts = text.split('\n');
  const last = parts.pop() as string;
  const out = parts.map((t) => ({ text: t, eol: true }));
  if (last !== '') out.push({ text: last, eol: false });
  return out;
}

/**
 * The host's own section of one file: header lines, then hunks whose changed lines carry their
 * ids (`-<old no>`, `+<new no>`). Decode bytes as latin1 to keep them.
 */
export function parseSection(section: string, path: string): { head: string[]; hunks: PatchHunk[] } {
  const rows = section.split('\n');
  if (rows.at(-1) === '') rows.pop();
  const head: string[] = [];
  const hunks: PatchHunk[] = [];
  let oldNo = 0;
  let newNo = 0;
  for (const row of rows) {
    const m = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,\d+)? @@(.*)$/.exec(row);
    if (m) {
      // An empty old side names the line before it: the hunk starts one further.
      hunks.push({ header: row, oldStart: Number(m[1]) + (m[2] === '0' ? 1 : 0), tail: m[4] as string, lines: [] });
      oldNo = Number(m[1]);
      newNo = Number(m[3]);
      continue;
    }
    const h = hunks.at(-1);
    if (!h) {
      head.push(row);
      continue;
    }
    const kind = row[0];
    if (kind === '\\') {
      const prev = h.lines.at(-1);
      if (prev) prev.eol = false;
    } else if (kind === ' ') {
      h.lines.push({ kind, text: row.slice(1), eol: true });
      oldNo++;
      newNo++;
    } else if (kind === '-') h.lines.push({ kind, text: row.slice(1), eol: true, id: `-${oldNo++}` });
    else if (kind === '+') h.lines.push({ kind, text: row.slice(1), eol: true, id: `+${newNo++}` });
    else throw new AirlockError('INTERNAL', `The result patch of ${path} has a line git does not write; please report this.`);
  }
  return { head, hunks };
}

function range(start: number, count: number): string {
  // git's convention: an empty side names the line before it.
  const at = count === 0 ? start - 1 : start;
  return count === 1 ? `${at}` : `${at},${count}`;
}

function renderPart(c: ResultChange, section: Buffer, base: Buffer, part: FileSelection): { content: Buffer; section: Buffer } {
  const { head, hunks } = parseSection(section.toString('latin1'), c.path);
  const knownIds = new Set(hunks.flatMap((h) => h.lines.map((l) => l.id).filter(Boolean)));
  const badHunk = (part.hunks ?? []).find((i) => !Number.isInteger(i) || i < 0 || i >= hunks.length);
  if (badHunk !== undefined) throw new AirlockError('INVALID_INPUT', `${c.path} has ${hunks.length} hunk(s), numbered from 0; there is no hunk ${badHunk}.`);
  const badLine = (part.lines ?? []).find((id) => !knownIds.has(id));
  if (badLine !== undefined) throw new AirlockError('INVALID_INPUT', `${c.path} has no changed line '${badLine}'; name lines as -<old line> or +<new line> from its diff.`);
  const wanted = new Set(part.lines ?? []);
  for (const i of part.hunks ?? []) for (const l of (hunks[i] as PatchHunk).lines) if (l.id) wanted.add(l.id);
  if (!wanted.size) throw new AirlockError('INVALID_INPUT', `Nothing of ${c.path} is selected; leave the file out instead.`);

  const baseLines = linesOf(base.toString('latin1'));
  const out: Array<{ text: string; eol: boolean }> = [];
  const body: string[] = [];
  let at = 0; // next base line (0-based)
  let delta = 0; // new-side offset from the selected changes so far
  const mismatch = () => new AirlockError('INTERNAL', `The result patch of ${c.path} does not match its base in the run's object store; the run folder was altered. Nothing was applied.`);
  for (const h of hunks) {
    const start = h.oldStart - 1;
    if (start < at || start > baseLines.length) throw mismatch();
    out.push(...baseLines.slice(at, start));
    at = start;
    const rows: PatchLine[] = [];
    let changed = false;
    for (const l of h.lines) {
      if (l.kind !== '+') {
        const b = baseLines[at++];
        if (!b || b.text !== l.text || b.eol !== l.eol) throw mismatch();
      }
      const take = l.id !== undefined && wanted.has(l.id);
      if (l.kind === ' ' || (l.kind === '-' && !take)) {
        out.push({ text: l.text, eol: l.eol });
        rows.push({ ...l, kind: ' ' });
      } else if (take) {
        if (l.kind === '+') out.push({ text: l.text, eol: l.eol });
        rows.push(l);
        changed = true;
      }
    }
    if (!changed) continue;
    const oldCount = rows.filter((r) => r.kind !== '+').length;
    const newCount = rows.filter((r) => r.kind !== '-').length;
    const newStart = h.oldStart + delta;
    delta += newCount - oldCount;
    body.push(`@@ -${range(h.oldStart, oldCount)} +${range(newStart, newCount)} @@${h.tail}`);
    for (const r of rows) body.push(`${r.kind}${r.text}`, ...(r.eol ? [] : ['\\ No newline at end of file']));
  }
  out.push(...baseLines.slice(at));
  const last = out.findIndex((l, i) => !l.eol && i < out.length - 1);
  if (last >= 0) {
    throw new AirlockError('INVALID_INPUT', `In ${c.path}, line ${last + 1} has no newline at its end and the selection adds lines after it; select the change to that line too.`);
  }
  const content = Buffer.from(out.map((l) => (l.eol ? `${l.text}\n` : l.text)).join(''), 'latin1');
  // The index line names the blob this part makes, as git would.
  const oid = blobOid(content);
  const header = head.map((row) => (row.startsWith('index ') ? row.replace(/^index ([0-9a-f]+)\.\.[0-9a-f]+/, `index $1..${oid}`) : row));
  return { content, section: Buffer.from(`${[...header, ...body].join('\n')}\n`, 'latin1') };
}
