import { createHash } from 'node:crypto';
import { chmodSync, lstatSync, readFileSync, readdirSync, readlinkSync, rmSync, symlinkSync, unlinkSync, writeFileSync, mkdirSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../core/sandbox/driver';
import { DockerDriver } from '../../core/sandbox/docker/docker-driver';
import { connectEngine, type Engine } from '../../core/sandbox/docker/engine';
import { SandboxManager, type Sandbox } from '../../core/sandbox/sandbox';
import { createProjectBase, engineSupportsBases, findProjectBase, prepareBaseVolumes, pruneProjectBases } from '../../core/sandbox/docker/project-base-volumes';
import { collectResult } from '../../core/workspace/collect';
import { HostRepo } from '../../core/workspace/host-repo';
import { BaseMismatchError, hydrateFromBase, type HydrateFromBaseResult } from '../../core/workspace/hydrate-base';
import { BaseStore, baseKey, type BaseRecord } from '../../core/workspace/project-base';
import { snapshotProject } from '../../core/workspace/snapshot';
import { cleanupTemps, tempDir, writeTree, testGit } from '../support/workspace-fixtures';
import { requirePrerequisite } from '../support/prerequisites';
import { sandboxImage, testRunId } from './sandbox-support';

const docker = await requirePrerequisite('docker');

/** Every path under `root` (no `.git`) with its type, exec bit and content digest: what a sandbox must equal. */
function listing(root: string): string[] {
  const out: string[] = [];
  const walk = (rel: string) => {
    for (const n of readdirSync(path.join(root, rel)).sort()) {
      const r = rel ? `${rel}/${n}` : n;
      if (!rel && n === '.git') continue;
      const st = lstatSync(path.join(root, r));
      if (st.isDirectory()) {
        out.push(`${r} d`);
        walk(r);
      } else if (st.isSymbolicLink()) out.push(`${r} l ${readlinkSync(path.join(root, r))}`);
      else out.push(`${r} f ${st.mode & 0o100 ? 'x' : '-'} ${createHash('sha256').update(readFileSync(path.join(root, r))).digest('hex')}`);
    }
  };
  walk('');
  return out.sort();
}

/** The same listing, taken inside the sandbox. */
const SANDBOX_LISTING = `cd /workspace && find . -mindepth 1 -path ./.git -prune -o -printf '%P %y\\n' | while read -r p t; do
  case $t in d) echo "$p d";; l) echo "$p l $(readlink "$p")";; f) if [ -x "$p" ]; then x=x; else x=-; fi; echo "$p f $x $(sha256sum < "$p" | cut -d' ' -f1)";; esac
done | LC_ALL=C sort`;

describe.skipIf(!docker.ok)('project bases on a real Docker engine', () => {
  let engine: Engine;
  let manager: SandboxManager;
  let image: string;
  let store: BaseStore;
  const made: Sandbox[] = [];

  beforeAll(async () => {
    engine = await connectEngine(process.env);
    image = await sandboxImage();
    manager = new SandboxManager(new DockerDriver({ env: process.env, engine }));
    store = new BaseStore(tempDir('airlock-bases-'));
    expect(await engineSupportsBases(engine)).toBe(true);
  });
  afterAll(async () => {
    for (const sb of made) await sb.destroy().catch(() => undefined);
    if (store) await pruneProjectBases(engine, store, { all: true }).catch(() => undefined);
    manager?.dispose();
    engine?.dispose();
    cleanupTemps();
  });

  /** A run's start from the base: overlay volumes, sandbox, the delta hydrate with the host's baseline. */
  async function runFromBase(dir: string, rec: BaseRecord): Promise<{ sb: Sandbox; h: HydrateFromBaseResult; repo: HostRepo }> {
    const runId = testRunId();
    await prepareBaseVolumes(engine, { runId, record: rec, image });
    const sb = await manager.create({ runId, image, limits: DEFAULT_LIMITS, network: 'none' });
    made.push(sb);
    const repo = await HostRepo.create(testGit, path.join(tempDir(), 'objects.git'), { borrowFrom: store.objectsDir(rec.key, rec.volume) });
    const h = await hydrateFromBase(sb.channel, await snapshotProject(testGit, dir), rec, { hostRepo: repo });
    await h.hostBaseline;
    return { sb, h, repo };
  }

  async function wipe(sb: Sandbox): Promise<void> {
    const proof = await sb.destroy();
    expect(proof.leftovers).toEqual([]);
  }

  async function sandboxListing(sb: Sandbox): Promise<string[]> {
    const r = await sb.channel.run({ argv: ['sh', '-c', SANDBOX_LISTING] });
    expect(r.exitCode).toBe(0);
    return r.stdout.toString('utf8').trim().split('\n').filter(Boolean).sort();
  }

  function project(): string {
    const dir = tempDir('airlock-base-project-');
    writeTree(dir, {
      'src/a.ts': 'export const a = 1;\n',
      'src/b.ts': 'export const b = 2;\n',
      'docs/old.md': 'to be deleted\n',
      'docs/keep.md': 'kept\n',
      'bin/run.sh': { content: '#!/bin/sh\necho run\n', mode: 0o755 },
      'link': { symlink: 'src/a.ts' },
      'was-file': 'becomes a folder\n',
      '.env': 'API_KEY=canary-not-for-the-sandbox\n',
    });
    return dir;
  }

  it('never holds an agent file; a file changed, added, deleted or retyped by the user is exactly as on disk in the next sandbox', async () => {
    const dir = project();
    let rec = await createProjectBase({ engine, git: testGit, image, store, projectDir: dir, racyMs: 0 });
    expect(rec.files.map((f) => f.path)).not.toContain('.env');

    // Run 1 starts from the base; its agent writes and edits files.
    const first = await runFromBase(dir, rec);
    expect(await sandboxListing(first.sb)).toEqual(listing(dir).filter((l) => !l.startsWith('.env ')));
    const agent = await first.sb.channel.run({ argv: ['sh', '-c', 'cd /workspace && echo agent > agent-file.txt && echo hacked > src/a.ts && rm docs/keep.md'] });
    expect(agent.exitCode).toBe(0);
    // The agent's work comes out as a result against the host's baseline, as always.
    const { result } = await collectResult(first.sb.channel, { repo: first.repo, baseCommit: (await first.h.hostBaseline) as string, manifest: first.h.manifest });
    expect(result.changes.map((c) => `${c.status} ${c.path}`).sort()).toEqual(['added agent-file.txt', 'deleted docs/keep.md', 'modified src/a.ts']);
    await first.repo.keepOnly(result.changes.flatMap((c) => [c.oldOid, c.newOid]).filter((o): o is string => !!o && !/^0+$/.test(o)));
    await wipe(first.sb);

    // The next base is written after the run, from the project: the agent's files are nowhere in it.
    rec = await createProjectBase({ engine, git: testGit, image, store, projectDir: dir, racyMs: 0 });
    expect(rec.files.map((f) => f.path)).not.toContain('agent-file.txt');

    // The user changes the project between runs.
    writeFileSync(path.join(dir, 'src/b.ts'), 'export const b = 3;\n');
    unlinkSync(path.join(dir, 'docs/old.md'));
    writeFileSync(path.join(dir, 'src/new.ts'), 'export const n = 0;\n');
    chmodSync(path.join(dir, 'src/a.ts'), 0o755);
    unlinkSync(path.join(dir, 'link'));
    symlinkSync('docs/keep.md', path.join(dir, 'link'));
    unlinkSync(path.join(dir, 'was-file'));
    mkdirSync(path.join(dir, 'was-file'));
    writeFileSync(path.join(dir, 'was-file/inside.txt'), 'now a folder\n');
    rmSync(path.join(dir, 'bin'), { recursive: true });

    const second = await runFromBase(dir, rec);
    const inside = await sandboxListing(second.sb);
    expect(inside).not.toContainEqual(expect.stringMatching(/^agent-file\.txt /));
    expect(inside).toEqual(listing(dir).filter((l) => !l.startsWith('.env ')));
    expect(second.h.delta.reused).toBeGreaterThan(0);
    expect(second.h.delta.streamed).toBeLessThan(second.h.files);
    // Both baselines are the commit of the project as read now: nothing to collect before the agent.
    await second.h.baselineReady;
    const none = await collectResult(second.sb.channel, { repo: second.repo, baseCommit: (await second.h.hostBaseline) as string, manifest: second.h.manifest });
    expect(none.result.changes).toEqual([]);
    await wipe(second.sb);
  });

  it('does not use a base whose recorded content hash does not match, nor one made again on the engine', async () => {
    const dir = project();
    const rec = await createProjectBase({ engine, git: testGit, image, store, projectDir: dir, racyMs: 0 });
    expect((await findProjectBase(engine, store, dir)).ok).toBe(true);

    // The host's record altered: its manifest no longer hashes to the digest the volume carries.
    const file = path.join(store.dir, rec.key, 'record.json');
    const saved = await readFile(file, 'utf8');
    const altered = JSON.parse(saved) as BaseRecord;
    (altered.files[0] as { oid: string }).oid = '0'.repeat(40);
    await writeFile(file, JSON.stringify(altered));
    expect(await findProjectBase(engine, store, dir)).toEqual({ ok: false, reason: 'no base recorded for this project' });
    await writeFile(file, saved);

    // The volume replaced under the same name (what any other writer would have to do): not used.
    await engine.docker.getVolume(rec.volume).remove({ force: true });
    await engine.docker.createVolume({ Name: rec.volume, Labels: { 'airlock.kind': 'base', 'airlock.base.key': rec.key } });
    const found = await findProjectBase(engine, store, dir);
    expect(found.ok).toBe(false);
    expect(found.ok ? '' : found.reason).toMatch(/made again/);
  });

  it('detects a base whose files were changed on the engine, before anything runs on it', async () => {
    const dir = project();
    const rec = await createProjectBase({ engine, git: testGit, image, store, projectDir: dir, racyMs: 0 });
    // Someone with engine access rewrites a file of the base with the same size.
    const tamper = await engine.docker.createContainer({
      Image: image,
      Entrypoint: ['sh', '-c', "printf 'export const a = 9;\\n' > /b/tree/src/a.ts"],
      User: '0:0',
      Labels: { 'airlock.test': 'base-tamper' },
      HostConfig: { NetworkMode: 'none', Mounts: [{ Type: 'volume', Source: rec.volume, Target: '/b' }] },
    });
    await tamper.start();
    expect(((await tamper.wait()) as { StatusCode: number }).StatusCode).toBe(0);
    await tamper.remove({ force: true });

    const found = await findProjectBase(engine, store, dir);
    expect(found.ok).toBe(true);
    await expect(runFromBase(dir, rec)).rejects.toBeInstanceOf(BaseMismatchError);
    const sb = made.pop() as Sandbox;
    await wipe(sb);
  });

  it('prune removes bases: every one with all, and those whose project folder is gone', async () => {
    const kept = project();
    const gone = project();
    const a = await createProjectBase({ engine, git: testGit, image, store, projectDir: kept, racyMs: 0 });
    const b = await createProjectBase({ engine, git: testGit, image, store, projectDir: gone, racyMs: 0 });
    rmSync(gone, { recursive: true, force: true });
    const first = await pruneProjectBases(engine, store);
    expect(first.removed).toContain(b.projectDir);
    expect(first.kept).toContain(a.projectDir);
    await expect(engine.docker.getVolume(b.volume).inspect()).rejects.toMatchObject({ statusCode: 404 });
    expect(await store.read(baseKey(gone))).toBeUndefined();

    // A base a live run reads is kept until the run is gone.
    const live = await runFromBase(kept, a);
    expect((await pruneProjectBases(engine, store, { all: true })).kept).toContain(a.projectDir);
    await wipe(live.sb);
    made.splice(made.indexOf(live.sb), 1);
    expect((await pruneProjectBases(engine, store, { all: true })).removed).toContain(a.projectDir);
    await expect(engine.docker.getVolume(a.volume).inspect()).rejects.toMatchObject({ statusCode: 404 });
    expect(await store.read(a.key)).toBeUndefined();
  });
});
