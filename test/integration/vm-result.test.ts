/*
 * A hostile agent in a QEMU VM: the result is still derived on the host. Software emulation is
 * forced so the test does not depend on this machine's KVM (which may open and then abort).
 */
import { randomBytes } from 'node:crypto';
import { lstat, mkdtemp, readFile, readlink, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureSandboxImage } from '../../core/sandbox/image';
import { QemuDriver } from '../../core/sandbox/qemu/qemu-driver';
import { SandboxManager, type Sandbox } from '../../core/sandbox/sandbox';
import { applyResult } from '../../core/workspace/apply';
import { listChanges } from '../../core/workspace/changes';
import { collectResult } from '../../core/workspace/collect';
import { HostRepo } from '../../core/workspace/host-repo';
import { hydrate } from '../../core/workspace/hydrate';
import { snapshotProject } from '../../core/workspace/snapshot';
import { cleanupTemps, gitRepo, tempDir, testGit } from '../support/workspace-fixtures';
import { requirePrerequisite } from '../support/prerequisites';
import { expectGitSteeringRefused, expectPlantedRepoInert, gitSteeringMarker, gitSteeringPlantScript } from '../support/git-steering-attack';
import { testEngine } from './sandbox-support';

const qemu = await requirePrerequisite('qemu');
const docker = qemu.ok ? await requirePrerequisite('docker') : qemu;

describe.skipIf(!qemu.ok || !docker.ok)('a hostile agent in a VM', () => {
  let runsDir: string;
  let manager: SandboxManager;
  let sandbox: Sandbox;

  beforeAll(async () => {
    runsDir = await mkdtemp(path.join(os.tmpdir(), 'airlock-vm-result-'));
    const driver = new QemuDriver({ env: process.env, engine: testEngine, paths: { runsDir }, diskBytes: 1024 ** 3, accel: 'tcg' });
    await driver.checkAvailable();
    const { ref } = await ensureSandboxImage({ env: process.env, engine: testEngine() });
    manager = new SandboxManager(driver);
    sandbox = await manager.create({ runId: `r-vmres-${randomBytes(4).toString('hex')}`, image: ref, limits: { memoryBytes: 1024 ** 3, cpus: 1, pids: 512 }, network: 'none' });
  });
  afterAll(async () => {
    if (sandbox) expect((await sandbox.destroy()).leftovers).toEqual([]);
    await manager?.shutdown().catch(() => undefined);
    await rm(runsDir, { recursive: true, force: true });
    cleanupTemps();
  });

  it('an agent that commits its work and deletes the sandbox baseline changes nothing: the host still lists, flags and applies what it read', async () => {
    const project = gitRepo({ 'a.txt': 'a\n', 'run.sh': 'echo\n' });
    const snapshot = await snapshotProject(testGit, project);
    const repo = await HostRepo.create(testGit, path.join(tempDir(), 'objects.git'));
    const hydrated = await hydrate(sandbox.channel, snapshot, { hostRepo: repo, gitHistory: 50 });
    // The agent's repository works the same in a VM: the user's commit, a clean status.
    const probe = await sandbox.channel.run({ argv: ['sh', '-c', 'cd /workspace && git log --format=%s && git status --porcelain'] });
    expect(probe.stdout.toString()).toBe('initial\n');
    // ...and committing its work there changes nothing the host derives.
    // It also plants git-steering files and .git aliases (issue 22, items 2 and 4).
    const marker = gitSteeringMarker();
    const agent = await sandbox.channel.run({
      argv: ['sh', '-c', `cd /workspace && echo A > a.txt && chmod +x run.sh && echo new > new.txt && ln -s /etc/passwd out && git add -A && git commit -qm agent-work && rm -rf /airlock/baseline.git\n${gitSteeringPlantScript(marker)}`],
    });
    // The agent cannot delete the baseline: /airlock is the helper's (docs/architecture.md §2.3).
    expect(agent.stderr.toString()).toMatch(/Permission denied/);
    // A subverted helper can (modelled as the helper's own command); the host still derives the same result.
    expect((await sandbox.channel.run({ argv: ['rm', '-rf', '/airlock/baseline.git'], as: 'helper' })).exitCode).toBe(0);
    // The sandbox's own tracking is gone.
    await expect(listChanges(sandbox.channel)).rejects.toMatchObject({ kind: 'SANDBOX_FAILED' });

    const collected = await collectResult(sandbox.channel, {
      repo,
      baseCommit: await (hydrated.hostBaseline as Promise<string>),
      manifest: hydrated.manifest,
      isIgnored: snapshot.isIgnored,
      ...(snapshot.headCommit ? { headCommit: snapshot.headCommit } : {}),
    });
    const { result, patch } = collected;
    expectGitSteeringRefused(collected);
    const own = new Set(['a.txt', 'new.txt', 'out', 'run.sh']);
    expect(result.changes.filter((c) => own.has(c.path)).map((c) => `${c.status} ${c.path} ${c.oldMode ?? '-'}→${c.newMode ?? '-'}`)).toEqual([
      'modified a.txt 100644→100644',
      'added new.txt -→100644',
      'added out -→120000',
      'modified run.sh 100644→100755',
    ]);
    expect(result.changes.find((c) => c.path === 'out')?.warnings).toEqual(['symlink pointing outside the project (/etc/passwd)']);

    const out = await applyResult({ projectDir: project, repo, result, patch, reviewedSha256: result.patchSha256, mode: 'working-tree' });
    expect(out.conflicts).toEqual([]);
    expect(await readFile(path.join(project, 'a.txt'), 'utf8')).toBe('A\n');
    expect((await lstat(path.join(project, 'run.sh'))).mode & 0o100).not.toBe(0);
    expect(await readlink(path.join(project, 'out'))).toBe('/etc/passwd');
    expectPlantedRepoInert(project, marker);
  });
});
