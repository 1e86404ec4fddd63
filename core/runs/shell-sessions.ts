import path from 'node:path';
import { AirlockError } from '../../contracts/errors';
import { MAX_SHELLS_PER_RUN } from '../../contracts/terminals';
import type { ChannelProcess } from '../channel/channel-client';
import type { Disposable } from '../common/disposable';
import type { TerminalOutput } from '../common/terminal-output';
import type { RunService } from './run-service';
import type { RunStore } from './run-store';
import { RunTerminal } from './run-terminal';

interface Shell {
  runId: string;
  process: ChannelProcess;
  terminal: RunTerminal;
}

/**
 * Interactive shells in live runs' sandboxes (`runs:openShell`, `terminals:write|resize|close`).
 * Each shell is its own PTY and bash (own cwd and environment), at most `MAX_SHELLS_PER_RUN` per
 * run. Its output goes to its own log (`shell-<n>.log`) and to `onOutput`; a shell ends by itself,
 * when closed (SIGHUP, like a closed terminal window) or with its sandbox.
 */
export class ShellSessions implements Disposable {
  private readonly shells = new Map<string, Shell>();
  private counter = 0;

  constructor(
    private readonly runs: Pick<RunService, 'sandboxOf'>,
    private readonly store: RunStore,
    private readonly onOutput: (output: TerminalOutput) => void,
  ) {}

  open(runId: string, cols: number, rows: number): { terminalId: string } {
    const sandbox = this.runs.sandboxOf(runId);
    if (!sandbox) throw new AirlockError('CONFLICT', 'The run has no live sandbox (it has ended, or not started yet); a shell opens only while the run is in progress.');
    const open = [...this.shells.values()].filter((s) => s.runId === runId).length;
    if (open >= MAX_SHELLS_PER_RUN) {
      throw new AirlockError('CONFLICT', `This run already has ${MAX_SHELLS_PER_RUN} shells open, the most one run can have; close one of them to open another.`);
    }
    const n = ++this.counter;
    const terminalId = `shell:${runId}:${n}`;
    const terminal = new RunTerminal(terminalId, runId, path.join(this.store.paths(runId).dir, `shell-${n}.log`), this.onOutput);
    const proc = sandbox.channel.spawn({ argv: ['bash', '-l'], cwd: '/workspace', pty: { cols, rows }, env: { TERM: 'xterm-256color' } });
    proc.onStdout((d) => terminal.write(d));
    proc.onStderr((d) => terminal.write(d));
    // The shell ends by itself, or with the sandbox (the channel closes): either way it exits.
    void proc.exited
      .then((e) => terminal.exit(e.exitCode), () => terminal.exit(null))
      .finally(() => this.shells.delete(terminalId));
    this.shells.set(terminalId, { runId, process: proc, terminal });
    return { terminalId };
  }

  write(terminalId: string, data: string): boolean {
    const shell = this.shells.get(terminalId);
    shell?.process.write(data);
    return shell !== undefined;
  }

  resize(terminalId: string, cols: number, rows: number): boolean {
    const shell = this.shells.get(terminalId);
    shell?.process.resize(cols, rows);
    return shell !== undefined;
  }

  close(terminalId: string): boolean {
    const shell = this.shells.get(terminalId);
    shell?.process.kill('SIGHUP');
    return shell !== undefined;
  }

  dispose(): void {
    for (const shell of this.shells.values()) shell.process.kill('SIGKILL');
  }
}
