import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sandboxCommand } from '../../core/cli/commands/sandbox';
import { DEFAULT_LIMITS } from '../../core/sandbox/driver';
import { DockerDriver } from '../../core/sandbox/docker/docker-driver';
import { SandboxManager, type Sandbox } from '../../core/sandbox/sandbox';
import { applyResult } from '../../core/workspace/apply';
import { fileDiff, listChanges, watchChanges } from '../../core/workspace/changes';
import { collectResult } from '../../core/workspace/collect';
import { HostRepo } from '../../core/workspace/host-repo';
import { hydrate } from '../../core/workspace/hydrate';
import { snapshotProject } from '../../core/workspace/snapshot';
import { cleanupTemps, fingerprint, git, gitRepo, tempDir, testGit } from '../support/workspace-fixtures';
import { requirePrerequisite } from '../support/prerequisites';
import { expectGitSteeringRefused, expectPlantedRepoInert, gitSteeringMarker, gitSteeringPlantScript } from '../support/git-steering-attack';
import { sandboxImage, testRunId, testEngine } from './sandbox-support';

const docker = await requirePrerequisite('docker');

const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0, 0, 1, 2, 3, 255]);

function project() {
  return gitRepo({
    'src/app.ts': 'export const a = 1;\nexport const b = 2;\n',
    'src/old.ts': 'export const moved = true;\n// enough text for rename detection to work\n'.repeat(3),
    'bin/run.sh': '#!/bin/sh\necho run\n',
    'docs/gone.md': 'delete me\n',
    'img/logo.png': PNG,
    '.env': 'API_KEY=canary-not-for-the-sandbox',
    'link': { symlink: 'src/app.ts' },
  });
}

/** What an agent does inside: edit, rename, delete, chmod, binary edit, add — as the sandbox user. */
const AGENT_SCRIPT = [
  'set -e',
  'cd /workspace',
  "printf 'export const a = 1;\\nexport const b = 3;\\n' > src/app.ts",
  'mv src/old.ts src/new.ts',
  'rm docs/gone.md',
  'chmod +x bin/run.sh',
  "printf '\\211PNG\\000\\000\\000\\001\\002\\003\\377\\007' > img/logo.png",
  "printf 'added\\n' > added.txt",
  'mkdir -p node_modules/x && echo dep > node_modules/x/index.js',
  'test ! -e .env',
].join('\n');

describe.skipIf(!docker.ok)('workspace in a real Docker sandbox', () => {
  let manager: SandboxManager;
  let image: string;

  beforeAll(async () => {
    image = await sandboxImage();
    manager = new SandboxManager(new DockerDriver({ env: process.env, engine: testEngine() }));
  });
  afterAll(() => {
    manager?.dispose();
    cleanupTemps();
  });

  async function withSandbox<T>(fn: (sb: Sandbox) => Promise<T>): Promise<T> {
    const sb = await manager.create({ runId: testRunId(), image, limits: DEFAULT_LIMITS, network: 'none' });
    try {
      return await fn(sb);
    } finally {
      const proof = await sb.destroy();
      expect(proof.leftovers).toEqual([]);
    }
  }

  it('hydrate → changes inside → diff → patch and apply on the original; the project is never written', async () => {
    const dir = project();
    const before = fingerprint(dir);
    await withSandbox(async (sb) => {
      const snapshot = await snapshotProject(testGit, dir);
      const progress: number[] = [];
      const repo = await HostRepo.create(testGit, path.join(tempDir(), 'objects.git'));
      const hydrated = await hydrate(sb.channel, snapshot, { onProgress: (p) => progress.push(p.files), hostRepo: repo });
      expect(hydrated.baselineCommit).toMatch(/^[0-9a-f]{40}$/);
      expect(hydrated.files).toBe(6);
      expect(progress.at(-1)).toBe(6);
      expect(hydrated.excluded).toContainEqual(expect.objectContaining({ path: '.env', kind: 'secret' }));
      // The copy is owned by the sandbox user and the baseline sits outside /workspace.
      const ls = await sb.channel.run({ argv: ['sh', '-c', 'stat -c "%U %a %n" /workspace/src/app.ts /workspace/bin/run.sh; readlink /workspace/link; ls -A /workspace; test -d /airlock/baseline.git && echo baseline-ok'] });
      const text = ls.stdout.toString();
      expect(text).toMatch(/644 \/workspace\/src\/app\.ts/);
      expect(text).toContain('src/app.ts\n');
      expect(text).not.toMatch(/^\.git$/m);
      expect(text).toContain('baseline-ok');
      expect(await listChanges(sb.channel)).toEqual([]);

      // The agent's own git use in /workspace does not disturb the baseline.
      const agent = await sb.channel.run({ argv: ['sh', '-c', `${AGENT_SCRIPT}\ngit init -q . && git add -A && git -c user.name=a -c user.email=a@a commit -qm agent`] });
      expect(agent.stderr.toString()).toBe('');
      expect(agent.exitCode).toBe(0);

      const changes = await listChanges(sb.channel);
      const by = Object.fromEntries(changes.map((c) => [c.path, c]));
      expect(Object.keys(by).sort()).toEqual(['added.txt', 'bin/run.sh', 'docs/gone.md', 'img/logo.png', 'src/app.ts', 'src/new.ts']);
      expect(by['src/new.ts']).toMatchObject({ status: 'renamed', oldPath: 'src/old.ts' });
      expect(by['bin/run.sh']).toMatchObject({ modeChanged: true, newMode: '100755' });
      expect(by['docs/gone.md']?.status).toBe('deleted');
      expect(by['img/logo.png']).toMatchObject({ binary: true, status: 'modified' });
      expect(by['added.txt']?.status).toBe('added');
      const d = await fileDiff(sb.channel, 'src/app.ts');
      expect(d.diff).toContain('-export const b = 2;\n+export const b = 3;');

      const { result, patch } = await collectResult(sb.channel, { repo, baseCommit: await (hydrated.hostBaseline as Promise<string>), ...(snapshot.headCommit ? { headCommit: snapshot.headCommit } : {}), manifest: hydrated.manifest });
      expect(result.changes.map((c) => c.path).sort()).toEqual(Object.keys(by).sort());
      expect(fingerprint(dir)).toBe(before);
      git(dir, ['apply', '--check', '-'], patch);

      // Apply to the original while the user edited a neighbouring line meanwhile: refused, kept.
      execFileSync('sh', ['-c', `printf 'export const a = 10;\\nexport const b = 2;\\n// user\\n' > ${path.join(dir, 'src/app.ts')}`]);
      // Whole or nothing by default: the conflict holds every file back.
      const held = await applyResult({ projectDir: dir, repo, result, patch, reviewedSha256: result.patchSha256, mode: 'working-tree' });
      expect(held.conflicts).toEqual([{ path: 'src/app.ts', reason: expect.stringMatching(/overlap/) }]);
      expect(held.applied).toEqual([]);
      expect(existsSync(path.join(dir, 'src/new.ts'))).toBe(false);
      expect(existsSync(path.join(dir, 'docs/gone.md'))).toBe(true);
      // The explicit partial apply writes the files that do not conflict.
      const applied = await applyResult({ projectDir: dir, repo, result, patch, reviewedSha256: result.patchSha256, mode: 'working-tree', skipConflicts: true });
      expect(applied.conflicts).toEqual([{ path: 'src/app.ts', reason: expect.stringMatching(/overlap/) }]);
      expect(readFileSync(path.join(dir, 'src/app.ts'), 'utf8')).toContain('// user');
      expect(existsSync(path.join(dir, 'src/new.ts'))).toBe(true);
      expect(existsSync(path.join(dir, 'docs/gone.md'))).toBe(false);
      expect(readFileSync(path.join(dir, 'img/logo.png')).equals(Buffer.concat([PNG, Buffer.from([7])]))).toBe(true);
      expect(readFileSync(path.join(dir, '.env'), 'utf8')).toBe('API_KEY=canary-not-for-the-sandbox');
    });
  });

  it('an agent that rewrites /airlock/baseline.git cannot change the result: it is derived on the host against the host baseline', async () => {
    const dir = project();
    await withSandbox(async (sb) => {
      const snapshot = await snapshotProject(testGit, dir);
      const repo = await HostRepo.create(testGit, path.join(tempDir(), 'objects.git'));
      const hydrated = await hydrate(sb.channel, snapshot, { hostRepo: repo });
      // The agent edits, then recommits the workspace as the sandbox's baseline and refreshes the
      // tracking index, so the sandbox's own git sees no change at all.
      const tamper = [
        AGENT_SCRIPT,
        'export GIT_DIR=/airlock/baseline.git GIT_WORK_TREE=/workspace GIT_INDEX_FILE=/airlock/changes.index GIT_CONFIG_GLOBAL=/dev/null',
        'git -c safe.directory=* add -A',
        'c=$(git -c safe.directory=* -c user.name=a -c user.email=a@a commit-tree $(git -c safe.directory=* write-tree) -m tampered)',
        'git -c safe.directory=* update-ref refs/heads/baseline "$c"',
      ].join('\n');
      // The agent itself cannot: /airlock is the helper's (docs/architecture.md §2.3)...
      const refused = await sb.channel.run({ argv: ['sh', '-c', tamper] });
      expect(refused.stderr.toString()).toMatch(/\/airlock\/.*Permission denied/);
      // ...and a subverted helper doing it (modelled as the helper's own command) still changes nothing the host derives.
      const run = await sb.channel.run({ argv: ['sh', '-c', tamper.replace(AGENT_SCRIPT, 'true')], as: 'helper' });
      expect(run.stderr.toString()).toBe('');
      expect(run.exitCode).toBe(0);
      // The sandbox's own view is fooled: it reports nothing changed.
      expect(await listChanges(sb.channel)).toEqual([]);

      const { result, patch } = await collectResult(sb.channel, {
        repo,
        baseCommit: await (hydrated.hostBaseline as Promise<string>),
        manifest: hydrated.manifest,
        isIgnored: snapshot.isIgnored,
        ...(snapshot.headCommit ? { headCommit: snapshot.headCommit } : {}),
      });
      expect(result.baseCommit).toBe(hydrated.baselineCommit);
      const by = Object.fromEntries(result.changes.map((c) => [c.path, c]));
      expect(Object.keys(by).sort()).toEqual(['added.txt', 'bin/run.sh', 'docs/gone.md', 'img/logo.png', 'src/app.ts', 'src/new.ts']);
      expect(by['src/new.ts']).toMatchObject({ status: 'renamed', oldPath: 'src/old.ts' });
      expect(by['bin/run.sh']).toMatchObject({ modeChanged: true, newMode: '100755' });
      expect(by['img/logo.png']).toMatchObject({ binary: true });
      expect(patch.toString()).toContain('-export const b = 2;\n+export const b = 3;');
      // Applied from host objects, the project ends up exactly as the agent left the workspace.
      const applied = await applyResult({ projectDir: dir, repo, result, patch, reviewedSha256: result.patchSha256, mode: 'working-tree' });
      expect(applied.conflicts).toEqual([]);
      expect(readFileSync(path.join(dir, 'src/app.ts'), 'utf8')).toBe('export const a = 1;\nexport const b = 3;\n');
      expect(existsSync(path.join(dir, 'src/old.ts'))).toBe(false);
      expect(existsSync(path.join(dir, 'node_modules'))).toBe(false);
    });
  });

  // docs/architecture.md §2.3, "No way back to the host": the helper holds no DAC_READ_SEARCH, so a file
  // or folder the agent makes private is unreadable to the live list's git. It is skipped there (the
  // list still works), and the result, read out as the agent, has it.
  it('a file the agent makes private: the live list skips it instead of failing, and the result has it', async () => {
    const dir = project();
    await withSandbox(async (sb) => {
      const snapshot = await snapshotProject(testGit, dir);
      const repo = await HostRepo.create(testGit, path.join(tempDir(), 'objects.git'));
      const hydrated = await hydrate(sb.channel, snapshot, { hostRepo: repo });
      const agent = "cd /workspace && printf 'hidden\\n' > secret.txt && chmod 600 secret.txt && mkdir priv && printf 'p\\n' > priv/p.txt && chmod 700 priv && printf 'seen\\n' > seen.txt";
      expect((await sb.channel.run({ argv: ['sh', '-c', agent] })).exitCode).toBe(0);
      // The helper itself cannot read it (no capability reads past the agent's modes).
      const peek = await sb.channel.run({ argv: ['cat', '/workspace/secret.txt'], as: 'helper' });
      expect(peek.stderr.toString()).toMatch(/Permission denied/);
      expect((await listChanges(sb.channel)).map((c) => c.path)).toEqual(['seen.txt']);
      const { result } = await collectResult(sb.channel, {
        repo,
        baseCommit: await (hydrated.hostBaseline as Promise<string>),
        manifest: hydrated.manifest,
        isIgnored: snapshot.isIgnored,
        ...(snapshot.headCommit ? { headCommit: snapshot.headCommit } : {}),
      });
      expect(result.changes.map((c) => c.path).sort()).toEqual(['priv/p.txt', 'secret.txt', 'seen.txt']);
    });
  });

  // Issue 22, items 2 and 4: a hostile agent plants a repository whose config runs a command
  // when the user's git enters its folder, git control files, and names that are .git on Windows
  // or macOS. The config and the aliases never reach the result; the rest is flagged; once the
  // whole result is applied, the user's own git runs nothing there.
  it('a planted repository, git control files and .git aliases from a live sandbox: refused or flagged, and inert once applied', async () => {
    const dir = gitRepo({ 'README.md': 'hi\n' });
    const marker = gitSteeringMarker();
    await withSandbox(async (sb) => {
      const snapshot = await snapshotProject(testGit, dir);
      const repo = await HostRepo.create(testGit, path.join(tempDir(), 'objects.git'));
      const hydrated = await hydrate(sb.channel, snapshot, { hostRepo: repo });
      const run = await sb.channel.run({ argv: ['sh', '-c', gitSteeringPlantScript(marker)] });
      expect(run.stderr.toString()).toBe('');
      expect(run.exitCode).toBe(0);
      const collected = await collectResult(sb.channel, {
        repo,
        baseCommit: await (hydrated.hostBaseline as Promise<string>),
        manifest: hydrated.manifest,
        isIgnored: snapshot.isIgnored,
        ...(snapshot.headCommit ? { headCommit: snapshot.headCommit } : {}),
      });
      expectGitSteeringRefused(collected);
      const applied = await applyResult({ projectDir: dir, repo, result: collected.result, patch: collected.patch, reviewedSha256: collected.result.patchSha256, mode: 'working-tree' });
      expect(applied.conflicts).toEqual([]);
      expectPlantedRepoInert(dir, marker);
    });
  });

  it('copies in a project larger than the channel window (the copy waits for credit, never overruns it)', async () => {
    // 12 MB of files that do not divide the 4 MiB window: the sender must cut a write at its edge.
    const files: Record<string, string> = {};
    for (let i = 0; i < 120; i++) files[`data/f${i}.txt`] = `${i}`.padEnd(100_003, 'x');
    const dir = gitRepo(files);
    await withSandbox(async (sb) => {
      const repo = await HostRepo.create(testGit, path.join(tempDir(), 'objects.git'));
      const hydrated = await hydrate(sb.channel, await snapshotProject(testGit, dir), { hostRepo: repo });
      expect(hydrated.files).toBe(120);
      const r = await sb.channel.run({ argv: ['sh', '-c', 'cat /workspace/data/*.txt | wc -c'] });
      expect(Number(r.stdout.toString().trim())).toBe(120 * 100_003);
      expect(await hydrated.hostBaseline).toBe(hydrated.baselineCommit);
    });
  });

  it('reports changed paths live while a command runs', async () => {
    const dir = project();
    await withSandbox(async (sb) => {
      await hydrate(sb.channel, await snapshotProject(testGit, dir));
      const seen = new Set<string>();
      let resolveSeen!: () => void;
      const gotAll = new Promise<void>((r) => (resolveSeen = r));
      const watcher = await watchChanges(sb.channel, (paths) => {
        for (const p of paths) seen.add(p);
        if (seen.has('src/live.ts') && seen.has('src/app.ts')) resolveSeen();
      });
      try {
        await sb.channel.run({ argv: ['sh', '-c', 'cd /workspace && echo x > src/live.ts && mkdir -p node_modules/y && echo 1 > node_modules/y/i.js && echo y >> src/app.ts'] });
        await gotAll;
      } finally {
        watcher.dispose();
      }
      expect([...seen].some((p) => p.startsWith('node_modules'))).toBe(false);
    });
  });

  it('airlock sandbox exec: streams output, prints the diff, wipes with proof, exits with the command code', async () => {
    const dir = project();
    const before = fingerprint(dir);
    const out = new PassThrough();
    const err = new PassThrough();
    const chunks = { out: [] as Buffer[], err: [] as Buffer[] };
    out.on('data', (c: Buffer) => chunks.out.push(c));
    err.on('data', (c: Buffer) => chunks.err.push(c));
    const patchFile = path.join(tempDir(), 'result.patch');
    const code = await sandboxCommand.run(
      ['exec', dir, '--patch', patchFile, '--', 'sh', '-c', 'echo to-stdout; echo to-stderr >&2; echo more >> src/app.ts; rm docs/gone.md; cat .env 2>/dev/null; exit 7'],
      // A session of the run service: recorded in a home of the test's own.
      { stdout: out, stderr: err, stdin: new PassThrough(), env: { ...process.env, AIRLOCK_HOME: tempDir() } },
    );
    const stdout = Buffer.concat(chunks.out).toString();
    const stderr = Buffer.concat(chunks.err).toString();
    expect(code).toBe(7);
    expect(stdout).toContain('to-stdout');
    expect(stdout).not.toContain('canary');
    expect(stderr).toContain('to-stderr');
    expect(stderr).toMatch(/\.env: environment file/);
    expect(stderr).toMatch(/M src\/app\.ts/);
    expect(stderr).toMatch(/D docs\/gone\.md/);
    expect(stdout).toContain('+more');
    const wipe = /wiped run (\S+): removed \d+ resource\(s\) in \d+ ms; verified: nothing labelled with the run remains/.exec(stderr);
    expect(wipe).not.toBeNull();
    const left = execFileSync('docker', ['ps', '-aq', '--filter', `label=airlock.run=${wipe![1]}`]).toString().trim();
    expect(left).toBe('');
    const volumes = execFileSync('docker', ['volume', 'ls', '-q', '--filter', `label=airlock.run=${wipe![1]}`]).toString().trim();
    expect(volumes).toBe('');
    expect(fingerprint(dir)).toBe(before);
    git(dir, ['apply', '--check', patchFile]);
  });

  it('airlock sandbox exec rejects a missing project folder with a usage-grade error', async () => {
    await expect(sandboxCommand.run(['exec', '/nonexistent/airlock', '--', 'true'], { stdout: new PassThrough(), stderr: new PassThrough(), stdin: new PassThrough(), env: process.env })).rejects.toMatchObject({ kind: 'NOT_FOUND' });
  });
});
