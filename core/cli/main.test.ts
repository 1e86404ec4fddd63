import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { captureIo } from '../../test/support/cli-io';
import { debugLog } from '../common/debug-log';
import { ExitCode } from './command';
import { commands, main } from './main';

let home: string;
beforeAll(async () => {
  home = await mkdtemp(path.join(os.tmpdir(), 'airlock-cli-'));
});
afterAll(async () => {
  await rm(home, { recursive: true, force: true });
});

async function cli(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const { io, out, err } = captureIo({ AIRLOCK_HOME: home, PATH: process.env.PATH });
  const code = await main(argv, io);
  return { code, out: out(), err: err() };
}

describe('airlock CLI arguments (README: exit 2 on bad usage)', () => {
  it.each(Object.keys(commands))('airlock %s --bogus exits 2 with the command\'s usage', async (name) => {
    const command = await (commands[name] as () => Promise<{ usage: string }>)();
    const r = await cli(name, '--bogus');
    expect(r.code).toBe(ExitCode.usage);
    expect(r.err).toContain(`usage: ${command.usage}`);
    expect(r.err).not.toContain('[INTERNAL]');
    expect(r.out).toBe('');
  });

  it('names the unknown option, except where the argument could be a pasted key', async () => {
    expect((await cli('runs', '--bogus')).err).toContain("unknown option or missing value: --bogus");
    const keys = await cli('keys', 'set', 'anthropic', '--sk-ant-api03-secret');
    expect(keys.code).toBe(ExitCode.usage);
    expect(keys.err).not.toContain('sk-ant');
    const pasted = await cli('keys', 'sk-ant-api03-secret');
    expect(pasted.code).toBe(ExitCode.usage);
    expect(pasted.err).not.toContain('sk-ant');
  });

  it('refuses bad values and wrong positionals of subcommands with exit 2', async () => {
    for (const argv of [
      ['runs', '--limit', 'many'],
      ['runs', 'extra'],
      ['show'],
      ['show', 'r-1', 'r-2'],
      ['run', './p', '--timeout', 'soon'],
      ['run', './p', '--publish', '70000'],
      ['serve', '--port', '-1'],
      ['audit', 'check', 'r-1'],
      ['audit', 'verify', 'r-1', '--bogus'],
      ['network', 'frobnicate'],
      ['network', 'allow', '--project', '.'],
      ['sandbox', 'exec', '.'],
      ['sandbox', 'exec', '.', '--bogus', '--', 'true'],
      ['sandbox', 'run'],
      ['providers', 'add'],
      ['doctor', 'now'],
    ]) {
      const r = await cli(...argv);
      expect(r.code, argv.join(' ')).toBe(ExitCode.usage);
      expect(r.err, argv.join(' ')).toMatch(/\nusage: airlock /);
    }
  });

  it('--engine takes docker, podman or auto on any command; anything else is exit 2 naming the choices', async () => {
    for (const argv of [['doctor', '--engine', 'lxc'], ['runs', '--engine'], ['run', './p', '--engine=containerd']]) {
      const r = await cli(...argv);
      expect(r.code, argv.join(' ')).toBe(ExitCode.usage);
      expect(r.err, argv.join(' ')).toContain('--engine needs one of auto, docker, podman');
    }
    // Accepted and taken out before the command parses its own options.
    expect((await cli('runs', '--engine', 'podman')).code).toBe(ExitCode.ok);
  });

  it('exits 2 for an unknown command and 0 for --help', async () => {
    expect((await cli('frobnicate')).code).toBe(ExitCode.usage);
    const help = await cli('runs', '--help');
    expect(help.code).toBe(ExitCode.ok);
    expect(help.out).toContain('usage: airlock runs');
  });
});

describe('--engine-host and the engineHost setting choose the engine for any command (docs/architecture.md §13)', () => {
  it('--engine-host wins over the setting; a refused address is a failed engine check that says why', async () => {
    const { writeFile } = await import('node:fs/promises');
    await writeFile(path.join(home, 'settings.json'), JSON.stringify({ engineHost: 'no-such-context' }));
    try {
      const fromSetting = await cli('doctor', '--no-build');
      expect(fromSetting.out + fromSetting.err).toMatch(/context 'no-such-context' was not found/);
      const fromFlag = await cli('doctor', '--no-build', '--engine-host', 'tcp://build-box.invalid:2375');
      expect(fromFlag.out + fromFlag.err).toMatch(/plain, unencrypted TCP/);
      expect(fromFlag.out + fromFlag.err).not.toMatch(/no-such-context/);
      expect(fromFlag.code).not.toBe(ExitCode.ok);
      const missing = await cli('doctor', '--engine-host');
      expect(missing.code).toBe(ExitCode.usage);
      expect(missing.err).toMatch(/--engine-host needs an address/);
    } finally {
      await rm(path.join(home, 'settings.json'), { force: true });
    }
  }, 60_000);

  it('--debug (any command, before --) prints the errors Airlock handled by itself while the command runs', async () => {
    const run = async (...argv: string[]) => {
      const { io, err } = captureIo({ AIRLOCK_HOME: home, PATH: process.env.PATH });
      // A best-effort step failing mid-command, deterministically: when the command first prints.
      const write = io.stdout.write.bind(io.stdout);
      let noted = false;
      io.stdout.write = ((chunk: string | Uint8Array, ...rest: never[]) => {
        if (!noted) debugLog.note('test.cleanup', new Error('could not remove a scratch file\nsecond line'));
        noted = true;
        return write(chunk, ...rest);
      }) as typeof io.stdout.write;
      const code = await main(argv, io);
      return { code, err: err() };
    };
    const debug = await run('runs', '--debug', '--json');
    expect(debug.code).toBe(ExitCode.ok);
    expect(debug.err).toContain('[debug] test.cleanup: could not remove a scratch file\n');
    expect(debug.err).not.toContain('second line');
    const quiet = await run('runs', '--json');
    expect(quiet.code).toBe(ExitCode.ok);
    expect(quiet.err).not.toContain('[debug]');
  });
});
