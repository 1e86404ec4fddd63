import path from 'node:path';
import { gitControlFileAlias, isDotGitAlias, windowsNameReason } from './git-path-aliases';

/**
 * Path rules for anything that came out of a sandbox and may be written into a project. One place,
 * used by collect (what can be part of a result) and apply (what may be written). A name is refused
 * if git's `verify_path` would refuse it on any OS (`git-path-aliases.ts`), since a result read here
 * may be applied on Windows or macOS (docs/architecture.md §11).
 */

/** Why a project-relative path can never be part of a result, or undefined when it can. */
export function unsafePathReason(p: string): string | undefined {
  if (!p) return 'empty name';
  if (Buffer.byteLength(p) > 4096) return 'name longer than 4096 bytes';
  if (p.includes('\0')) return 'NUL in the name';
  // A Windows separator (and drive letters) would name another place on Windows hosts.
  if (p.includes('\\')) return 'backslash in the name (a folder separator on Windows)';
  if (p.startsWith('/') || /^[A-Za-z]:/.test(p)) return 'absolute path';
  for (const c of p.split('/')) {
    if (c === '' || c === '.' || c === '..') return 'empty, "." or ".." path component';
    // `.git` in any case and any Unicode form, and every name Windows or macOS reads as `.git`
    // (git's verify_path on every OS: a result may be applied on another machine).
    if (foldName(c) === '.git' || /^\.git[\s.]*$/i.test(c) || /^git~\d+$/i.test(c) || isDotGitAlias(c)) return '.git metadata (or a name Windows or macOS reads as .git)';
    const control = gitControlFileAlias(c);
    if (control && c !== control) return `a name Windows or macOS reads as ${control}`;
    const windows = windowsNameReason(c);
    if (windows) return windows;
  }
  return undefined;
}

/** Why a symlink may not have this name (git refuses a symlinked `.gitmodules`; the other control files are read through it as well). */
export function unsafeSymlinkReason(p: string): string | undefined {
  const control = gitControlFileAlias(p.slice(p.lastIndexOf('/') + 1));
  return control ? `a symlink named ${control} (git would read the file it points to)` : undefined;
}

/** A name as a case-insensitive, normalisation-insensitive file system sees it (macOS, Windows). */
export function foldName(name: string): string {
  // Printable ASCII (nearly every name) needs no normalisation: a fast path for large trees.
  if (/^[\x20-\x7e]*$/.test(name)) return name.toLowerCase();
  return name.normalize('NFC').toLowerCase().normalize('NFC');
}

/** Each folded path of `paths` that stands for more than one exact path, with those paths. */
export function foldCollisions(paths: Iterable<string>): Map<string, string[]> {
  const byKey = new Map<string, Set<string>>();
  const seen = new Set<string>();
  for (const p of paths) {
    // Every prefix folder counts too: `D/x` and `d/y` put two folders in one place.
    for (let at = p.indexOf('/'); ; at = p.indexOf('/', at + 1)) {
      const sub = at < 0 ? p : p.slice(0, at);
      if (!seen.has(sub)) {
        seen.add(sub);
        const key = foldName(sub);
        let set = byKey.get(key);
        if (!set) byKey.set(key, (set = new Set()));
        set.add(sub);
      }
      if (at < 0) break;
    }
  }
  const out = new Map<string, string[]>();
  for (const [key, set] of byKey) if (set.size > 1) out.set(key, [...set].sort());
  return out;
}

/** Whether a symlink at `linkPath` (project-relative) with this target points outside the project. */
export function symlinkLeavesProject(linkPath: string, target: string): boolean {
  if (!target || target.startsWith('/') || target.includes('\\') || /^[A-Za-z]:/.test(target)) return true;
  const resolved = path.posix.normalize(path.posix.join(path.posix.dirname(linkPath), target));
  return resolved === '..' || resolved.startsWith('../');
}
