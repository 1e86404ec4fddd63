import { AirlockError } from '../../contracts/errors';
import { unquoteC } from './git-objects';

/** One file's part of a git patch. */
export interface PatchSection {
  /** Path before (absent for an added file). */
  oldPath?: string;
  /** Path after (absent for a deleted file). */
  newPath?: string;
  /** The section's bytes, `diff --git` line included. */
  text: Buffer;
}

const DIFF_HEADER = Buffer.from('diff --git ');

function stripPrefix(p: string, prefix: 'a/' | 'b/'): string {
  return p.startsWith(prefix) ? p.slice(2) : p;
}

/** `--- a/x\t` → `x`; `/dev/null` → undefined. */
function fileLinePath(rest: string, prefix: 'a/' | 'b/'): string | undefined {
  const trimmed = rest.replace(/\t$/, '');
  if (trimmed === '/dev/null') return undefined;
  return stripPrefix(unquoteC(trimmed), prefix);
}

/** Paths from `diff --git a/X b/Y` when no other line names them (mode-only, binary, pure renames). */
function headerPaths(header: string): [string, string] | undefined {
  if (header.startsWith('"')) {
    const m = /^("(?:[^"\\]|\\.)*")\s+(.*)$/.exec(header);
    if (!m) return undefined;
    const second = (m[2] as string).startsWith('"') ? unquoteC(m[2] as string) : (m[2] as string);
    return [stripPrefix(unquoteC(m[1] as string), 'a/'), stripPrefix(second, 'b/')];
  }
  if (header.endsWith('"')) {
    const idx = header.indexOf(' "');
    if (idx < 0) return undefined;
    return [stripPrefix(header.slice(0, idx), 'a/'), stripPrefix(unquoteC(header.slice(idx + 1)), 'b/')];
  }
  // Unquoted and same path on both sides: "a/X b/X".
  if ((header.length - 5) % 2 === 0) {
    const half = (header.length - 5) / 2;
    const a = header.slice(2, 2 + half);
    if (header === `a/${a} b/${a}`) return [a, a];
  }
  return undefined;
}

/** Splits a `git diff` patch into per-file sections with their paths. */
export function splitPatch(patch: Buffer): PatchSection[] {
  const starts: number[] = [];
  if (patch.subarray(0, DIFF_HEADER.length).equals(DIFF_HEADER)) starts.push(0);
  let from = 0;
  for (;;) {
    const at = patch.indexOf(`\n${DIFF_HEADER.toString()}`, from);
    if (at < 0) break;
    starts.push(at + 1);
    from = at + 1;
  }
  const sections: PatchSection[] = [];
  for (let i = 0; i < starts.length; i++) {
    const text = patch.subarray(starts[i], starts[i + 1] ?? patch.length);
    const lines = text.toString('utf8').split('\n');
    const header = (lines[0] as string).slice(DIFF_HEADER.length);
    let oldPath: string | undefined;
    let newPath: string | undefined;
    let sawOld = false;
    let sawNew = false;
    let isNew = false;
    let isDeleted = false;
    for (const line of lines.slice(1)) {
      if (line.startsWith('@@') || line.startsWith('GIT binary patch')) break;
      if (line.startsWith('rename from ')) (oldPath = unquoteC(line.slice(12))), (sawOld = true);
      else if (line.startsWith('rename to ')) (newPath = unquoteC(line.slice(10))), (sawNew = true);
      else if (line.startsWith('new file mode ')) isNew = true;
      else if (line.startsWith('deleted file mode ')) isDeleted = true;
      else if (line.startsWith('--- ') && !sawOld) (oldPath = fileLinePath(line.slice(4), 'a/')), (sawOld = true);
      else if (line.startsWith('+++ ') && !sawNew) (newPath = fileLinePath(line.slice(4), 'b/')), (sawNew = true);
    }
    if (!sawOld || !sawNew) {
      const paths = headerPaths(header);
      if (!paths) throw new AirlockError('INVALID_INPUT', `Cannot read the file names of patch section "diff --git ${header}"; the patch may be damaged — export it again from the run.`);
      if (!sawOld) oldPath = paths[0];
      if (!sawNew) newPath = paths[1];
    }
    if (isNew) oldPath = undefined;
    if (isDeleted) newPath = undefined;
    for (const p of [oldPath, newPath]) {
      if (p !== undefined && (p.startsWith('/') || p.split('/').some((c) => c === '..' || c === '.git' || c === ''))) {
        throw new AirlockError('INVALID_INPUT', `The patch names an unsafe path (${p}); refusing it. A run's patch only names paths inside the project.`);
      }
    }
    sections.push({ ...(oldPath !== undefined ? { oldPath } : {}), ...(newPath !== undefined ? { newPath } : {}), text });
  }
  return sections;
}

/** Keeps the sections that touch one of `files` (either side of a rename); unknown names are an error. */
export function selectSections(sections: PatchSection[], files?: string[]): PatchSection[] {
  if (!files) return sections;
  const wanted = new Set(files);
  const picked = sections.filter((s) => (s.newPath && wanted.has(s.newPath)) || (s.oldPath && wanted.has(s.oldPath)));
  const known = new Set(sections.flatMap((s) => [s.oldPath, s.newPath].filter((p): p is string => !!p)));
  const unknown = files.filter((f) => !known.has(f));
  if (unknown.length) {
    throw new AirlockError('INVALID_INPUT', `Not part of the result: ${unknown.join(', ')}. Pick files from the run's changed-file list.`);
  }
  return picked;
}
