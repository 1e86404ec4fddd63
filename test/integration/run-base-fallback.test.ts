import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProjectBase, findProjectBase } from '../../core/sandbox/docker/project-base-volumes';
import { baseKey } from '../../core/workspace/project-base';
import { requirePrerequisite } from '../support/prerequisites';
import { createRunFixture, leftoversOf, type RunFixture } from '../support/run-fixture';
import { testGit } from '../support/workspace-fixtures';

const docker = await requirePrerequisite('docker');

/**
 * A run whose project base was changed on the engine (docs/architecture.md §11, "Trust"): the run does
 * not fail and does not see the changed files; the base is removed and the project copied in whole.
 */
describe.skipIf(!docker.ok)('a run from a tampered project base (real Docker, fake upstream)', () => {
  let f: RunFixture;
  beforeAll(async () => {
    f = await createRunFixture();
  });
  afterAll(async () => {
    await f?.close();
  });

  it('falls back to a whole copy in a new sandbox, says so, and removes the base', async () => {
    const projectDir = await f.project({ 'src/a.ts': 'export const a = 1;\n', 'src/b.ts': 'export const b = 2;\n' });
    const engine = await f.core.engine();
    const image = await f.core.image('base');
    const rec = await createProjectBase({ engine, git: testGit, image, store: f.core.bases.store, projectDir, installation: await f.core.app.installationId(), racyMs: 0 });
    // Someone with access to the engine rewrites a file of the base (same size) and plants another.
    const tamper = await engine.docker.createContainer({
      Image: image,
      Entrypoint: ['sh', '-c', "printf 'export const a = 9;\\n' > /b/tree/src/a.ts && echo planted > /b/tree/planted.txt"],
      User: '0:0',
      Labels: { 'airlock.test': 'base-tamper' },
      HostConfig: { NetworkMode: 'none', Mounts: [{ Type: 'volume', Source: rec.volume, Target: '/b' }] },
    });
    await tamper.start();
    expect(((await tamper.wait()) as { StatusCode: number }).StatusCode).toBe(0);
    await tamper.remove({ force: true });
    // Listed with the prepared environments (`airlock env list`, the app's Settings).
    const listed = await f.services.environments.list({});
    expect(listed.bases).toContainEqual(expect.objectContaining({ project: rec.projectDir, volume: rec.volume, files: 2, projectExists: true }));
    // The engine-side identity is untouched: only the content check can tell.
    expect((await findProjectBase(engine, f.core.bases.store, projectDir)).ok).toBe(true);

    const started = await f.start({
      projectDir,
      script: [
        { toolCalls: [{ name: 'run_command', input: { command: 'echo "SEEN<""<$(cat src/a.ts)|$(ls)>>"; echo edit >> src/b.ts' } }] },
        { toolCalls: [{ name: 'finish', input: { summary: 'looked' } }] },
      ],
    });
    const run = await f.core.runs.wait(started.id);
    expect(run.error).toBeUndefined();
    expect(run.status).toBe('done');
    const log = await f.terminalLog(run.id);
    // The sandbox held the project as on disk: not the base's changed file, not its planted one.
    expect(/SEEN<<([^>]*)>>/.exec(log)?.[1]).toBe('export const a = 1;|src');
    expect(run.changedFiles.map((c) => c.path)).toEqual(['src/b.ts']);
    const { records } = await f.services.audit.read({ runId: run.id, offset: 0, limit: 1000 });
    const notes = records.filter((r) => r.type === 'note').map((r) => String(r.data.message));
    // The run did start from the base (Airlock's own image counts as no project environment).
    expect(notes.some((m) => m.startsWith("the workspace starts from the project's base"))).toBe(true);
    expect(notes.some((m) => m.startsWith('base_check_failed:') && m.includes('src/a.ts'))).toBe(true);
    expect(notes).toContain('the project is copied in whole into a new sandbox (the base was not used)');
    // The base is gone from the engine and from the host's records; the run left nothing behind.
    await expect(engine.docker.getVolume(rec.volume).inspect()).rejects.toMatchObject({ statusCode: 404 });
    expect(await f.core.bases.store.read(baseKey(projectDir))).toBeUndefined();
    expect(await leftoversOf(run.id)).toEqual([]);
  });
});
