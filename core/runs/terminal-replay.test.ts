import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newRunId } from '../../contracts/ids';
import { RunStore } from './run-store';
import { replayTerminal } from './terminal-replay';
import { testGit } from '../../test/support/workspace-fixtures';

let home: string;
let store: RunStore;
beforeAll(async () => {
  home = await mkdtemp(path.join(os.tmpdir(), 'airlock-replay-'));
  store = new RunStore({ git: testGit, home });
});
afterAll(async () => {
  store.dispose();
  await rm(home, { recursive: true, force: true });
});

describe('terminal replay', () => {
  it('pages a run terminal log without ending a page inside a character', async () => {
    const runId = newRunId();
    await mkdir(store.paths(runId).dir, { recursive: true });
    await writeFile(path.join(store.paths(runId).dir, 'terminal.log'), 'ab€cd'); // € is 3 bytes
    const first = await replayTerminal(store, `run:${runId}`, 0, 3);
    expect(first).toEqual({ data: 'ab', nextOffset: 2, done: false, totalBytes: 7 });
    const rest = await replayTerminal(store, `run:${runId}`, first.nextOffset, 100);
    expect(rest).toEqual({ data: '€cd', nextOffset: 7, done: true, totalBytes: 7 });
    expect(await replayTerminal(store, `shell:${runId}:1`, 0, 10)).toEqual({ data: '', nextOffset: 0, done: true, totalBytes: 0 });
  });

  it('refuses ids that are not a terminal of a run', async () => {
    for (const id of ['run:../../etc', 'shell:r-1-00000000:../x', 'other:x']) {
      await expect(replayTerminal(store, id, 0, 10)).rejects.toMatchObject({ kind: 'INVALID_INPUT' });
    }
  });
});
