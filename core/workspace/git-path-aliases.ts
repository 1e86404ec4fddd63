/**
 * The names git's `verify_path` refuses on some OS, checked on every OS (docs/architecture.md §11,
 * "Collect"): a result is read on one machine and may be applied on another, so a name that is
 * harmless on Linux but is `.git` on Windows or macOS is never part of a result. Ported from git's
 * rules (`is_ntfs_dotgit`, `is_ntfs_dot_generic`, `is_hfs_dotgit`/`next_hfs_char`,
 * `is_valid_win32_path`), not its code; `git-path-aliases.test.ts` runs the name lists of git's own
 * test suite (t0060 path-utils, t1014 read-tree-confusing).
 */

/** Code points HFS+ ignores when it compares names (git's `next_hfs_char`). */
const HFS_IGNORED = new Set([0x200c, 0x200d, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x206a, 0x206b, 0x206c, 0x206d, 0x206e, 0x206f, 0xfeff]);

/** `component` as HFS+ compares it against an ASCII needle: ignorable code points dropped. */
function hfsFold(component: string): string {
  let out = '';
  for (const ch of component) if (!HFS_IGNORED.has(ch.codePointAt(0) as number)) out += ch;
  return out;
}

/** Whether HFS+ sees `component` as `.<needle>` (ASCII needle, any case, ignorable code points anywhere). */
function isHfsDot(component: string, needle: string): boolean {
  const folded = hfsFold(component);
  // Only ASCII letters can match the needle: git clamps anything above 127 to "no match".
  return folded.length === needle.length + 1 && folded[0] === '.' && /^[\x00-\x7f]*$/.test(folded) && asciiLower(folded.slice(1)) === needle;
}

/** Lower-cases ASCII letters only (`toLowerCase` maps some non-ASCII letters to ASCII ones, e.g. K, and may change the length). */
function asciiLower(s: string): string {
  return s.replace(/[A-Z]/g, (c) => c.toLowerCase());
}

/** Whether the rest of an NTFS name is only spaces and periods up to its end or an alternate data stream (`:`). */
function ntfsTailIsEmpty(rest: string): boolean {
  for (const c of rest) {
    if (c === ':') return true;
    if (c !== ' ' && c !== '.') return false;
  }
  return true;
}

/** `is_ntfs_dotgit`: `.git` or `git~1`, any case, then only spaces/periods, or a stream (`.git::$INDEX_ALLOCATION`). */
export function isNtfsDotGit(component: string): boolean {
  const lower = asciiLower(component);
  if (lower.startsWith('.git')) return ntfsTailIsEmpty(component.slice(4));
  if (lower.startsWith('git~1')) return ntfsTailIsEmpty(component.slice(5));
  return false;
}

/**
 * `is_ntfs_dot_generic`: the NTFS names of `.<name>` — itself (any case, trailing spaces/periods,
 * a stream), its 8.3 short name (the first six letters, `~1`…`~4`) and the fall-back short names
 * Windows makes from a hash (`<prefix>~<digit>` shortened so the whole stays eight characters).
 */
export function isNtfsDot(component: string, name: string, shortPrefix: string): boolean {
  const lower = asciiLower(component);
  if (lower.startsWith(`.${name}`)) return ntfsTailIsEmpty(component.slice(name.length + 1));
  if (lower.startsWith(name.slice(0, 6)) && component[6] === '~' && component[7] !== undefined && component[7] >= '1' && component[7] <= '4') return ntfsTailIsEmpty(component.slice(8));
  let sawTilde = false;
  for (let i = 0; i < 8; i++) {
    const c = component[i];
    if (c === undefined) return false;
    if (sawTilde) {
      if (c < '0' || c > '9') return false;
    } else if (c === '~') {
      const d = component[++i];
      if (d === undefined || d < '1' || d > '9') return false;
      sawTilde = true;
    } else if (i >= 6 || c.charCodeAt(0) > 0x7f || asciiLower(c) !== shortPrefix[i]) {
      return false;
    }
  }
  return ntfsTailIsEmpty(component.slice(8));
}

/** The git control files git knows NTFS and HFS+ aliases of, with their Windows fall-back short-name prefixes. */
export const GIT_CONTROL_FILES = [
  { name: 'gitmodules', shortPrefix: 'gi7eba' },
  { name: 'gitattributes', shortPrefix: 'gi7d29' },
  { name: 'gitignore', shortPrefix: 'gi250a' },
  { name: 'mailmap', shortPrefix: 'maba30' },
] as const;

/**
 * Every alias starts with `.`, `g`, `m` or `~` (the short-name prefixes), or with a non-ASCII code
 * point (one HFS+ ignores): any other name is none, without the checks below (the fast path for
 * the thousands of names a collect checks).
 */
function mayBeAlias(component: string): boolean {
  const c = component.charCodeAt(0);
  return c === 0x2e || c === 0x67 || c === 0x47 || c === 0x6d || c === 0x4d || c === 0x7e || c > 0x7f;
}

/** Whether `component` is `.git` on NTFS (Windows) or HFS+ (macOS). */
export function isDotGitAlias(component: string): boolean {
  return mayBeAlias(component) && (isNtfsDotGit(component) || isHfsDot(component, 'git'));
}

/** Which git control file (`.gitmodules`, `.gitattributes`, `.gitignore`, `.mailmap`) `component` is on some file system, if any. */
export function gitControlFileAlias(component: string): string | undefined {
  if (!mayBeAlias(component)) return undefined;
  for (const f of GIT_CONTROL_FILES) if (isNtfsDot(component, f.name, f.shortPrefix) || isHfsDot(component, f.name)) return `.${f.name}`;
  return undefined;
}

/** Windows device names, reserved in every folder and with any extension (`aux.c`, `NUL .txt`). */
const RESERVED_DEVICE = /^(?:con|prn|aux|nul|com[1-9]|lpt[1-9]|conin\$|conout\$) *(?:[.:]|$)/i;

/** Why Windows cannot hold `component` as a file name (git's `is_valid_win32_path`), or undefined. */
export function windowsNameReason(component: string): string | undefined {
  if (RESERVED_DEVICE.test(component)) return `a Windows device name (${component.slice(0, 40)})`;
  const bad = /[:<>"|?*\x01-\x1f]/.exec(component);
  if (bad) return bad[0] === ':' ? '":" in a name (an NTFS alternate data stream on Windows)' : `a character Windows does not allow in names (${JSON.stringify(bad[0])})`;
  // Windows drops trailing spaces and periods ("a." is "a"), so the name would be another file.
  if (/[ .]$/.test(component) && component !== '.' && component !== '..') return 'a name ending in a space or period (Windows drops them)';
  return undefined;
}
