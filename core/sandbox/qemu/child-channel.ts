import { spawn } from 'node:child_process';
import { hostToolCwd, hostToolEnv } from '../../common/host-tool-env';
import type { ChannelStream } from '../driver';

/**
 * A channel carried by a host child process's stdin/stdout — `limactl shell … nerdctl exec -i …`,
 * `wsl.exe -d … -- node helper.js` (docs/architecture.md §4). Stderr goes to a bounded tail for diagnostics;
 * close() ends stdin and kills the process.
 */
export function spawnChannelStream(cmd: string, args: readonly string[], opts: { env: NodeJS.ProcessEnv }): ChannelStream {
  const child = spawn(cmd, [...args], { stdio: ['pipe', 'pipe', 'pipe'], env: hostToolEnv(opts.env), cwd: hostToolCwd(), windowsHide: true });
  let tail = '';
  child.stderr.on('data', (c: Buffer) => {
    tail = (tail + c.toString('utf8')).slice(-4000);
  });
  child.on('error', (e) => {
    tail += `\n${cmd}: ${e.message}`;
    child.stdout.destroy();
  });
  child.stdin.on('error', () => undefined);
  let closed = false;
  return {
    readable: child.stdout,
    writable: child.stdin,
    close: () => {
      if (closed) return;
      closed = true;
      child.stdin.end();
      child.kill('SIGKILL');
    },
    stderrTail: () => tail,
  };
}
