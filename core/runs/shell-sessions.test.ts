import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MAX_SHELLS_PER_RUN } from '../../contracts/terminals';
import type { ChannelProcess } from '../channel/channel-client';
import { Emitter } from '../common/disposable';
import type { Sandbox } from '../sandbox/sandbox';
import { RunStore } from './run-store';
import { ShellSessions } from './shell-sessions';
import { testGit } from '../../test/support/workspace-fixtures';

/** A channel process that records what the shell sessions ask of it. */
function fakeProcess(calls: string[]): ChannelProcess {
  let exit!: (e: { exitCode: number | null }) => void;
  const exited = new Promise<{ exitCode: number | null }>((r) => (exit = r));
  return {
    id: calls.length,
    onStdout: new Emitter<Buffer>().event,
    onStderr: new Emitter<Buffer>().event,
    exited: exited as ChannelProcess['exited'],
    write: (d) => calls.push(`write ${String(d)}`),
    end: () => calls.push('end'),
    kill: (sig) => {
      calls.push(`kill ${sig}`);
      exit({ exitCode: null });
    },
    resize: (cols, rows) => calls.push(`resize ${cols}x${rows}`),
  };
}

const RUN = 'r-1-00000000';
let home: string;
let store: RunStore;
let calls: string[];
let shells: ShellSessions;

beforeEach(async () => {
  home = await mkdtemp(path.join(os.tmpdir(), 'airlock-shells-'));
  store = new RunStore({ git: testGit, home });
  await mkdir(store.paths(RUN).dir, { recursive: true });
  calls = [];
  const sandbox = { channel: { spawn: (opts: { pty?: { cols: number; rows: number } }) => (calls.push(`spawn pty ${opts.pty?.cols}x${opts.pty?.rows}`), fakeProcess(calls)) } } as unknown as Sandbox;
  shells = new ShellSessions({ sandboxOf: (id) => (id === RUN ? sandbox : undefined) }, store, () => {});
});
afterEach(async () => {
  shells.dispose();
  await store.close();
  await rm(home, { recursive: true, force: true });
});

describe('ShellSessions', () => {
  it('gives each shell its own PTY at the asked size, resizes and closes the one named', async () => {
    const a = shells.open(RUN, 120, 30).terminalId;
    const b = shells.open(RUN, 80, 24).terminalId;
    expect(a).not.toBe(b);
    expect(shells.resize(b, 100, 40)).toBe(true);
    expect(shells.close(a)).toBe(true);
    expect(calls).toEqual(['spawn pty 120x30', 'spawn pty 80x24', 'resize 100x40', 'kill SIGHUP']);
    // A closed shell is gone: writing to it is refused, the other one still takes input.
    await new Promise((r) => setImmediate(r));
    expect(shells.write(a, 'x')).toBe(false);
    expect(shells.write(b, 'pwd\r')).toBe(true);
  });

  it(`opens at most ${MAX_SHELLS_PER_RUN} per run, with an error that says what to do`, async () => {
    const ids = Array.from({ length: MAX_SHELLS_PER_RUN }, () => shells.open(RUN, 80, 24).terminalId);
    expect(() => shells.open(RUN, 80, 24)).toThrow(/already has 8 shells open.*close one/);
    shells.close(ids[0]!);
    await new Promise((r) => setImmediate(r));
    expect(shells.open(RUN, 80, 24).terminalId).toMatch(/^shell:/);
  });

  it('refuses a run without a live sandbox', () => {
    expect(() => shells.open('r-2-00000000', 80, 24)).toThrow(/no live sandbox/);
  });
});
