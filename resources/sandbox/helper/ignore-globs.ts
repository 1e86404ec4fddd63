/**
 * A small gitignore-like matcher for watch ignores: `name` matches a path segment at any depth,
 * `dir/` matches a directory and everything below it, a pattern with an inner or leading `/` is
 * anchored at the watched root; `*`, `?` and `**` are globs. The regex source is valid both in
 * JavaScript and as a POSIX ERE (for `inotifywait --exclude`).
 */

function escapeRe(ch: string): string {
  return /[.[\]()*+?{}|^$\\]/.test(ch) ? `\\${ch}` : ch;
}

function globToRe(glob: string): string {
  let re = '';
  for (let i = 0; i < glob.length; i++) {
    const ch = glob[i]!;
    if (ch === '*') {
      if (glob[i + 1] === '*') {
        re += '.*';
        i++;
        if (glob[i + 1] === '/') i++;
      } else {
        re += '[^/]*';
      }
    } else if (ch === '?') {
      re += '[^/]';
    } else {
      re += escapeRe(ch);
    }
  }
  return re;
}

/** Regex source matching a relative path (no leading slash) against one pattern; `root` prefixes anchored ones. */
function patternRe(pattern: string, root: string): string | undefined {
  let p = pattern.trim();
  if (p === '' || p.startsWith('#')) return undefined;
  if (p.endsWith('/')) p = p.slice(0, -1);
  const anchored = p.includes('/');
  if (p.startsWith('/')) p = p.slice(1);
  if (p === '') return undefined;
  const body = globToRe(p);
  return anchored ? `^${root}${body}(/|$)` : `(^|/)${body}(/|$)`;
}

/** Regex source for all patterns; `rootPrefix` is the escaped absolute root plus `/` for full paths. */
export function ignoreRegexSource(patterns: string[], rootPrefix = ''): string | undefined {
  const parts = patterns.map((p) => patternRe(p, rootPrefix)).filter((s): s is string => s !== undefined);
  if (parts.length === 0) return undefined;
  return parts.map((s) => `(${s})`).join('|');
}

export function escapeForRegex(text: string): string {
  return [...text].map(escapeRe).join('');
}

/** A predicate on relative paths (using `/`). */
export function ignoreMatcher(patterns: string[]): (relPath: string) => boolean {
  const src = ignoreRegexSource(patterns);
  if (!src) return () => false;
  const re = new RegExp(src);
  return (relPath) => re.test(relPath);
}
