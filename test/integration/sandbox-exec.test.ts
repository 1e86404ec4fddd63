import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sandboxCommand } from '../../core/cli/commands/sandbox';
import { requirePrerequisite } from '../support/prerequisites';
import { createRunFixture, leftoversOf, type RunFixture } from '../support/run-fixture';

/**
 * `airlock sandbox exec` is a session of the run service (docs/architecture.md §17): its change list
 * and patch are derived on the host, never read from the sandbox's own git. The sandbox here has a
 * `git` first on its PATH that answers `status` and `diff` with nothing; the change reported is the
 * true one, recorded as a run, and applies by its digest.
 */

const docker = await requirePrerequisite('docker');
const run = promisify(execFile);

describe.skipIf(!docker.ok)('airlock sandbox exec: a host-derived result from a sandbox whose git lies (real engine)', () => {
  let fx: RunFixture;
  let scratch: string;
  const tag = `airlock-test-lying-git:${process.pid}`;
  const label = `lying-git-${process.pid}`;

  beforeAll(async () => {
    fx = await createRunFixture();
    scratch = await mkdtemp(path.join(os.tmpdir(), 'airlock-lying-git-'));
    // Airlock's own image with a lying git in front of the real one.
    const base = await fx.core.image('base');
    await writeFile(
      path.join(scratch, 'Dockerfile'),
      [
        `FROM ${base}`,
        'USER root',
        `RUN printf '%s\\n' '#!/bin/sh' 'for a in "$@"; do case "$a" in status|diff) exit 0;; esac; done' 'exec /usr/bin/git "$@"' > /usr/local/bin/git && chmod 755 /usr/local/bin/git`,
        'USER 1000:1000',
        '',
      ].join('\n'),
    );
    await run('docker', ['build', '-q', '--label', `airlock.test=${label}`, '-t', tag, scratch], { maxBuffer: 16 * 1024 * 1024 });
  }, 900_000);
  afterAll(async () => {
    // The test's image and the environment images Airlock derived from it (they inherit its label).
    const images = (await run('docker', ['images', '-q', '--filter', `label=airlock.test=${label}`]).catch(() => ({ stdout: '' }))).stdout.split('\n').filter(Boolean);
    await run('docker', ['image', 'rm', '-f', tag, ...new Set(images)]).catch(() => undefined);
    await fx?.close();
    if (scratch) await rm(scratch, { recursive: true, force: true });
  });

  it('reports the true change (the sandbox git says there is none), records the run and wipes it; the digest applies it', async () => {
    const project = await fx.project({ 'README.md': '# lying\n', 'src/keep.txt': 'same\n' });
    const out = new PassThrough();
    const err = new PassThrough();
    const chunks = { out: [] as Buffer[], err: [] as Buffer[] };
    out.on('data', (c: Buffer) => chunks.out.push(c));
    err.on('data', (c: Buffer) => chunks.err.push(c));
    const code = await sandboxCommand.run(['exec', project, '--image', tag, '--', 'sh', '-c', 'echo "changed inside" >> README.md; echo "status:[$(git status --porcelain)]"'], {
      stdout: out,
      stderr: err,
      stdin: new PassThrough(),
      env: { ...process.env, AIRLOCK_HOME: fx.home },
    });
    const stdout = Buffer.concat(chunks.out).toString();
    const stderr = Buffer.concat(chunks.err).toString();
    expect(code, stderr).toBe(0);
    // The sandbox's git lies: asked inside, it sees no change.
    expect(stdout).toContain('status:[]');
    // What Airlock reports is the truth, derived on the host.
    expect(stderr).toMatch(/1 file\(s\) changed:\n {2}M README\.md/);
    expect(stdout).toContain('+changed inside');
    const runId = /wiped run (\S+): removed \d+ resource\(s\) in \d+ ms; verified: nothing labelled with the run remains/.exec(stderr)?.[1];
    expect(runId, stderr).toBeTruthy();
    expect(await leftoversOf(runId as string)).toEqual([]);
    // A recorded run (History, audit with the command) whose reviewed digest applies with `airlock apply`.
    const record = await fx.services.runs.get({ runId: runId as string });
    expect(record).toMatchObject({ agent: 'mcp', mcpClient: 'airlock sandbox exec', status: 'done' });
    expect(await readFile(fx.core.store.paths(runId as string).audit, 'utf8')).toContain('"command"');
    const sha = /result sha256: ([0-9a-f]{64}) {2}\(after reviewing: airlock apply (\S+) --reviewed \1\)/.exec(stderr);
    expect(sha?.[2]).toBe(runId);
    expect(await readFile(path.join(project, 'README.md'), 'utf8')).toBe('# lying\n');
    const applied = await fx.services.diffs.apply({ runId: runId as string, reviewedSha256: sha?.[1] as string, mode: 'working-tree' });
    expect(applied.applied).toEqual(['README.md']);
    expect(await readFile(path.join(project, 'README.md'), 'utf8')).toBe('# lying\nchanged inside\n');
  }, 900_000);
});
