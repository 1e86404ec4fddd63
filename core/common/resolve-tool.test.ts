import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findTool, resolveTool } from './resolve-tool';

// Issue 12, attack 6: a tool named like a real one, dropped into the project folder, never runs on the host.
describe('resolveTool', () => {
  let dir = '';
  let project = '';
  let bin = '';
  const cwd = process.cwd();
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'airlock-tool-'));
    project = path.join(dir, 'project');
    bin = path.join(dir, 'bin');
    await mkdir(project);
    await mkdir(bin);
    for (const d of [project, bin]) {
      await writeFile(path.join(d, 'airlock-fake-tool'), '#!/bin/sh\necho hi\n');
      await chmod(path.join(d, 'airlock-fake-tool'), 0o755);
    }
    await writeFile(path.join(project, 'only-here'), '#!/bin/sh\n');
    await chmod(path.join(project, 'only-here'), 0o755);
    process.chdir(project);
  });
  afterAll(async () => {
    process.chdir(cwd);
    await rm(dir, { recursive: true, force: true });
  });

  it('skips relative PATH entries (the current folder) and takes the first absolute one', async () => {
    const env = { PATH: ['', '.', 'project', bin].join(path.delimiter) };
    expect(await resolveTool('airlock-fake-tool', env)).toBe(path.join(bin, 'airlock-fake-tool'));
    expect(await findTool('only-here', env)).toBeUndefined();
    await expect(resolveTool('only-here', env)).rejects.toMatchObject({ kind: 'NOT_FOUND' });
  });

  it('refuses relative paths and keeps absolute ones', async () => {
    expect(await findTool('./airlock-fake-tool', { PATH: bin })).toBeUndefined();
    expect(await findTool('/usr/bin/env', { PATH: '' })).toBe('/usr/bin/env');
  });
});
