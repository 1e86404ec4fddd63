import { PassThrough } from 'node:stream';
import type { CliIo } from '../../core/cli/command';

/** CLI streams that keep what a command printed, for tests; stdin is empty. */
export function captureIo(env: NodeJS.ProcessEnv): { io: CliIo; out: () => string; err: () => string } {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = '';
  let err = '';
  stdout.on('data', (d) => (out += d));
  stderr.on('data', (d) => (err += d));
  const stdin = new PassThrough();
  stdin.end();
  return { io: { stdout, stderr, stdin, env }, out: () => out, err: () => err };
}
