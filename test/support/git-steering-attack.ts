import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'vitest';
import { classifyRisky } from '../../core/runs/run-apply';
import type { CollectedResult } from '../../core/workspace/collect';

/**
 * Issue 22, items 2 and 4, from inside a live sandbox: what a hostile agent plants in /workspace
 * so that the user's own git runs its commands once the result is applied (a bare repository with
 * `core.fsmonitor`, git control files) or so that the result names `.git` on Windows or macOS.
 * `marker` is a host path the planted fsmonitor would create.
 */
export function gitSteeringPlantScript(marker: string): string {
  const zwnj = "$(printf '.g\\342\\200\\214it')";
  return [
    'set -e',
    'cd /workspace',
    'git init -q --bare vendor/evil.git',
    'g() { git --git-dir=vendor/evil.git "$@"; }',
    'g config core.bare false',
    'g config core.worktree ..',
    `g config core.fsmonitor 'touch ${marker}; false'`,
    ': > vendor/evil.git/objects/info/packs',
    'echo x > vendor/evil.git/refs/heads/keep',
    "printf '[submodule \"x\"]\\n\\tpath = x\\n\\turl = ../evil\\n' > .gitmodules",
    "printf '* filter=evil\\n' > .gitattributes",
    "printf '[lfs]\\n\\turl = http://lfs.invalid/\\n' > .lfsconfig",
    "mkdir -p 'GIT~1' sub && echo x > 'GIT~1/config'",
    "echo x > '.git::$INDEX_ALLOCATION'",
    `mkdir -p "${zwnj}" && echo x > "${zwnj}/config"`,
    "echo x > con.txt && echo x > 'trail.'",
    'ln -s ../README.md sub/.gitattributes',
  ].join('\n');
}

/** A fresh host path for the planted fsmonitor's marker. */
export function gitSteeringMarker(): string {
  return path.join(os.tmpdir(), `airlock-fsmonitor-ran-${process.pid}-${Date.now()}`);
}

/** What the host must have made of the planted files: refused, flagged, and — once applied — inert. */
export function expectGitSteeringRefused(collected: CollectedResult): void {
  const { result, patch } = collected;
  const changed = result.changes.map((c) => c.path);
  const skipped = new Map(result.skipped.map((s) => [s.path, s.reason]));
  for (const p of ['vendor/evil.git/config', 'GIT~1/config', '.git::$INDEX_ALLOCATION', '.g\u200cit/config', 'con.txt', 'trail.', 'sub/.gitattributes']) {
    expect(changed, p).not.toContain(p);
    expect(skipped.has(p), `${p} listed as left out`).toBe(true);
  }
  expect(skipped.get('vendor/evil.git/config')).toMatch(/git repository planted at vendor\/evil\.git/);
  expect(changed.filter((p) => p.startsWith('vendor/evil.git/hooks/'))).toEqual([]);
  const flags = new Map(classifyRisky(result.changes, patch).map((f) => [f.path, f.reason]));
  expect(flags.get('vendor/evil.git/HEAD')).toMatch(/planted/);
  expect(flags.get('.gitmodules')).toMatch(/submodules/);
  expect(flags.get('.gitattributes')).toMatch(/filters/);
  expect(flags.get('.lfsconfig')).toMatch(/LFS/);
}

/** After the whole result is applied: the user's own git, entering the planted folder, runs nothing. */
export function expectPlantedRepoInert(projectDir: string, marker: string): void {
  expect(existsSync(path.join(projectDir, 'vendor/evil.git/HEAD'))).toBe(true);
  expect(existsSync(path.join(projectDir, 'vendor/evil.git/config'))).toBe(false);
  try {
    execFileSync('git', ['status'], { cwd: path.join(projectDir, 'vendor/evil.git'), stdio: 'ignore', env: { ...process.env, GIT_CONFIG_GLOBAL: os.devNull, GIT_CONFIG_NOSYSTEM: '1' } });
  } catch {
    // Whatever git says: the point is what it ran.
  }
  expect(existsSync(marker)).toBe(false);
}
