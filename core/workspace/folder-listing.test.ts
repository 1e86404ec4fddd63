import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listFolders, withRecentProject } from './folder-listing';

describe('folder browser under home (projects:listFolders)', () => {
  let root: string;
  let home: string;
  beforeAll(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'airlock-folders-'));
    home = path.join(root, 'home');
    await mkdir(path.join(home, 'code', 'app'), { recursive: true });
    await mkdir(path.join(home, 'Documents'));
    await mkdir(path.join(home, '.ssh'));
    await writeFile(path.join(home, 'secret.txt'), 'not listed');
    await mkdir(path.join(root, 'outside'));
    await symlink(path.join(root, 'outside'), path.join(home, 'escape'));
  });
  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('lists folder names only: no files, no hidden folders, no symlinks', async () => {
    const top = await listFolders(undefined, home);
    expect(top).toEqual({ path: home, parent: null, home, folders: ['code', 'Documents'], truncated: false });
    const code = await listFolders(path.join(home, 'code'), home);
    expect(code).toMatchObject({ path: path.join(home, 'code'), parent: home, folders: ['app'] });
    expect(await listFolders('code', home)).toMatchObject({ path: path.join(home, 'code') });
  });

  it('refuses folders outside home, also through a symlink or ..', async () => {
    await expect(listFolders(path.join(root, 'outside'), home)).rejects.toMatchObject({ kind: 'FORBIDDEN', field: 'projectDir' });
    await expect(listFolders(path.join(home, 'escape'), home)).rejects.toMatchObject({ kind: 'FORBIDDEN' });
    await expect(listFolders(path.join(home, '..'), home)).rejects.toMatchObject({ kind: 'FORBIDDEN' });
    await expect(listFolders(path.join(home, 'missing'), home)).rejects.toMatchObject({ kind: 'NOT_FOUND' });
    await expect(listFolders(path.join(home, 'secret.txt'), home)).rejects.toMatchObject({ kind: 'INVALID_INPUT' });
  });

  it('keeps the 8 latest project folders, newest first, without repeats', () => {
    const eight = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'];
    expect(withRecentProject(eight, 'c')).toEqual(['c', 'a', 'b', 'd', 'e', 'f', 'g', 'h']);
    expect(withRecentProject(eight, 'z')).toEqual(['z', 'a', 'b', 'c', 'd', 'e', 'f', 'g']);
    expect(withRecentProject(undefined, 'z')).toEqual(['z']);
  });
});
