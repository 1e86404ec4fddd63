import type { ChangedFile } from '../../contracts/diffs';

/**
 * Which of an attempt's changed files the check itself may read (docs/architecture.md §18): a check
 * that passes after the agent rewrote the test, its runner's configuration or the script the check
 * command names proves nothing. The list errs on the side of flagging: a flagged pass is shown as
 * unproven, never as failed, so a false flag costs one look at Review.
 */

/** Runner and build configuration a test command reads (by base name). */
const CONFIG_NAMES = new Set([
  'package.json', 'conftest.py', 'pytest.ini', 'tox.ini', 'setup.cfg', 'pyproject.toml', 'noxfile.py',
  'makefile', 'gnumakefile', 'justfile', 'taskfile.yml', 'cargo.toml', 'go.mod', 'build.gradle', 'build.gradle.kts', 'pom.xml',
  '.mocharc.json', '.mocharc.js', '.mocharc.yml', 'karma.conf.js', 'phpunit.xml', 'phpunit.xml.dist', 'rakefile', '.rspec',
]);
/** `jest.config.ts`, `vitest.config.mts`, `playwright.config.js`, `vitest.workspace.ts`… */
const CONFIG_PATTERN = /^(jest|vitest|playwright|cypress|ava|mocha|babel|tsconfig)(\.[a-z]+)*\.(c|m)?(js|ts|json)$/i;
const TEST_DIR = /(^|\/)(test|tests|__tests__|spec|specs|testing|e2e)\//i;
const TEST_NAME = /(\.|_|-)(test|spec)\.[a-z0-9]+$|^test_[^/]+\.py$|_test\.(go|py|rb|exs?)$/i;

/** Words of the check command that look like paths (`bash check.sh`, `./scripts/ci.sh --fast`, `pytest tests/x.py::y`). */
function commandPaths(command: string): string[] {
  return command
    .split(/[\s;&|<>()'"`=]+/)
    .map((w) => w.replace(/::.*$/, '').replace(/^\.\//, ''))
    .filter((w) => w.length > 0 && !w.startsWith('-') && /[./]/.test(w));
}

/** The changed files a check command may read, each with the reason, in the order given. */
export function checkTouchedFiles(command: string, files: readonly Pick<ChangedFile, 'path' | 'oldPath'>[]): { path: string; reason: string }[] {
  const named = commandPaths(command);
  const out: { path: string; reason: string }[] = [];
  for (const f of files) {
    const paths = [f.path, ...(f.oldPath ? [f.oldPath] : [])];
    const reason = paths.map((p) => reasonFor(p, named)).find((r) => r !== undefined);
    if (reason) out.push({ path: f.path, reason });
  }
  return out;
}

function reasonFor(path: string, named: readonly string[]): string | undefined {
  const base = path.slice(path.lastIndexOf('/') + 1);
  // The file itself (relative or under the sandbox's workspace), or a folder holding it.
  if (named.some((n) => n === path || n.endsWith(`/${path}`) || path.startsWith(`${n.replace(/\/+$/, '')}/`))) return 'named in the check command';
  if (TEST_NAME.test(base) || TEST_DIR.test(path)) return 'a test file';
  if (CONFIG_NAMES.has(base.toLowerCase()) || CONFIG_PATTERN.test(base)) return 'test or build configuration';
  return undefined;
}
