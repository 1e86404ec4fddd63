import { describe, expect, it } from 'vitest';
import { escapeForRegex, ignoreMatcher, ignoreRegexSource } from './ignore-globs';

describe('watch ignore patterns', () => {
  const ignored = ignoreMatcher(['.git/', 'node_modules/', '*.log', '/build', 'docs/**/*.tmp', 'cache?']);

  it('matches a directory pattern at any depth and everything below it', () => {
    expect(ignored('.git')).toBe(true);
    expect(ignored('.git/HEAD')).toBe(true);
    expect(ignored('packages/a/node_modules/x/index.js')).toBe(true);
    expect(ignored('src/.gitignore')).toBe(false);
    expect(ignored('my_node_modules/x')).toBe(false);
  });

  it('matches name globs on any segment and anchors patterns with a slash', () => {
    expect(ignored('debug.log')).toBe(true);
    expect(ignored('a/b/trace.log')).toBe(true);
    expect(ignored('a/b/trace.log.txt')).toBe(false);
    expect(ignored('build/out.js')).toBe(true);
    expect(ignored('src/build/out.js')).toBe(false);
    expect(ignored('docs/a/b/x.tmp')).toBe(true);
    expect(ignored('docs/x.tmp')).toBe(true);
    expect(ignored('cache1/x')).toBe(true);
    expect(ignored('cache12/x')).toBe(false);
  });

  it('builds an anchored full-path regex for inotifywait --exclude', () => {
    const src = ignoreRegexSource(['/build', 'node_modules/'], `${escapeForRegex('/work/my.repo')}/`)!;
    const re = new RegExp(src);
    expect(re.test('/work/my.repo/build/x')).toBe(true);
    expect(re.test('/work/myXrepo/build/x')).toBe(false);
    expect(re.test('/work/my.repo/a/node_modules')).toBe(true);
    expect(re.test('/work/my.repo/src/build')).toBe(false);
    expect(ignoreRegexSource([])).toBeUndefined();
  });
});
