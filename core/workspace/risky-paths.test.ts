import { describe, expect, it } from 'vitest';
import { classifyRiskyPaths } from './risky-paths';

const flagged = (paths: Parameters<typeof classifyRiskyPaths>[0]) => [...new Set(classifyRiskyPaths(paths).map((r) => r.path))].sort();

describe('classifyRiskyPaths', () => {
  it('flags what runs on the user machine later', () => {
    const risky = [
      '.github/workflows/ci.yml',
      '.gitlab-ci.yml',
      '.circleci/config.yml',
      'Jenkinsfile',
      '.husky/pre-commit',
      '.githooks/pre-push',
      '.pre-commit-config.yaml',
      'lefthook.yml',
      '.vscode/tasks.json',
      '.vscode/launch.json',
      '.idea/runConfigurations/dev.xml',
      '.devcontainer/devcontainer.json',
      '.claude/settings.json',
      '.claude/hooks/pre-tool.sh',
      '.mcp.json',
      'AGENTS.md',
      'CLAUDE.md',
      '.cursor/mcp.json',
      '.cursorrules',
      '.bashrc',
      'tools/.zshrc',
      'Makefile',
      'build/rules.mk',
      '.envrc',
      'setup.py',
      'pyproject.toml',
      'conftest.py',
      'build.rs',
      'gradle/wrapper/gradle-wrapper.properties',
      '.npmrc',
    ];
    expect(flagged(risky)).toEqual([...risky].sort());
    for (const r of classifyRiskyPaths(risky)) expect(r.reason.length).toBeGreaterThan(10);
  });

  it('leaves ordinary source, docs and tests alone', () => {
    expect(
      flagged(['src/index.ts', 'README.md', 'docs/guide.md', 'test/app.test.ts', '.github/ISSUE_TEMPLATE/bug.md', '.vscode/extensions.json', '.claude/commands/review.md', 'src/claude.md.ts', 'lib/makefile_parser.py']),
    ).toEqual([]);
  });

  it('inspects the package.json diff for lifecycle scripts and URL dependencies', () => {
    const scriptDiff = '@@ -3,6 +3,7 @@\n   "scripts": {\n     "test": "vitest",\n+    "postinstall": "node ./setup.js",\n     "build": "tsc"\n';
    const versionDiff = '@@ -1,4 +1,4 @@\n-  "version": "1.0.0",\n+  "version": "1.0.1",\n';
    const depDiff = '@@ -9,3 +9,4 @@\n   "dependencies": {\n+    "helper": "git+https://example.invalid/helper.git",\n';
    const testScript = '@@ -3,6 +3,6 @@\n-    "test": "vitest",\n+    "test": "vitest run",\n';
    expect(classifyRiskyPaths([{ path: 'package.json', diff: scriptDiff }])).toEqual([{ path: 'package.json', reason: expect.stringMatching(/lifecycle script/) }]);
    expect(classifyRiskyPaths([{ path: 'package.json', diff: versionDiff }])).toEqual([]);
    expect(classifyRiskyPaths([{ path: 'package.json', diff: testScript }])).toEqual([]);
    expect(classifyRiskyPaths([{ path: 'packages/a/package.json', diff: depDiff }])).toEqual([{ path: 'packages/a/package.json', reason: expect.stringMatching(/URL, git or local path/) }]);
    // Without a diff, package.json is flagged for a look.
    expect(flagged(['package.json'])).toEqual(['package.json']);
  });

  it('flags files made executable or turned into symlinks, and renames into risky places', () => {
    expect(classifyRiskyPaths([{ path: 'scripts/x.sh', oldMode: '100644', newMode: '100755' }])).toEqual([{ path: 'scripts/x.sh', reason: 'made executable' }]);
    expect(classifyRiskyPaths([{ path: 'data', oldMode: '100644', newMode: '120000' }])[0]?.reason).toMatch(/symlink/);
    expect(flagged([{ path: '.github/workflows/release.yml', oldPath: 'docs/release.yml' }])).toEqual(['.github/workflows/release.yml']);
  });
});
