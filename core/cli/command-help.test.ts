import { describe, expect, it, vi } from 'vitest';
import { captureIo } from '../../test/support/cli-io';
import { COMMAND_HELP } from './command-help';
import { ExitCode } from './command';
import { main } from './main';

// Loading any of these modules fails the test: `--help` must not pay for the core (cli.start.run_help).
vi.mock('./commands/run', () => {
  throw new Error('airlock run --help loaded the run command');
});
vi.mock('./commands/sandbox', () => {
  throw new Error('airlock sandbox --help loaded the sandbox command');
});
vi.mock('./commands/mcp', () => {
  throw new Error('airlock mcp --help loaded the mcp command');
});
vi.mock('./commands/history', () => {
  throw new Error('airlock apply --help loaded the history commands');
});

describe('a heavy command\'s --help is printed without loading the command', () => {
  it.each([['run', '--help'], ['sandbox', '-h'], ['mcp', '--help'], ['apply', '--help']] as const)('airlock %s %s', async (name, flag) => {
    const { io, out } = captureIo({ PATH: process.env.PATH });
    expect(await main([name, flag], io)).toBe(ExitCode.ok);
    expect(out()).toBe(`${COMMAND_HELP[name].summary}\n\nusage: ${COMMAND_HELP[name].usage}\n`);
  });
});
