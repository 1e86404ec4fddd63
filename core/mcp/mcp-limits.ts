import path from 'node:path';
import { AirlockError } from '../../contracts/errors';

/** Caps of the MCP door (docs/architecture.md §17); every one is checked on the host. */
export interface McpLimits {
  /** Live sandboxes one client connection may hold at once. */
  sandboxesPerClient: number;
  /** Bytes of stdout and of stderr a `sandbox_exec` keeps (head and tail), readable as a resource. */
  outputBytes: number;
  /** Bytes of stdout and of stderr the `sandbox_exec` result itself carries (head and tail): sized for an agent's context; past it, a resource link to the kept output. */
  resultBytes: number;
  /** Largest file `sandbox_read_file` returns and `sandbox_write_file` takes. */
  fileBytes: number;
  /** Entries `sandbox_list_files` returns. */
  listEntries: number;
  /** Bytes of patch text a diff or result carries (the digest always covers the whole patch). */
  patchBytes: number;
  /** A sandbox nobody used for this long is wiped. */
  idleMs: number;
  /** Wall-clock limit of one sandbox. */
  sessionTimeoutSec: number;
  /** Longest `sandbox_exec` timeout a client may ask for. */
  maxExecTimeoutSec: number;
  /** Agent runs (`run_start`, `run_continue`) one client connection may have in progress at once. */
  runsPerClient: number;
  /** The token budget of an MCP run that names none (a client's run never runs unbounded). */
  runBudgetTokens: number;
}

/** Progress is sent at least this often during long waits, so clients that reset their timeout on progress never hit it. */
export const KEEP_ALIVE_MS = 15_000;

export const DEFAULT_MCP_LIMITS: McpLimits = {
  sandboxesPerClient: 4,
  outputBytes: 1024 * 1024,
  resultBytes: 8 * 1024,
  fileBytes: 10 * 1024 * 1024,
  listEntries: 5000,
  patchBytes: 2 * 1024 * 1024,
  idleMs: 30 * 60_000,
  sessionTimeoutSec: 8 * 3600,
  maxExecTimeoutSec: 3600,
  runsPerClient: 4,
  runBudgetTokens: 2_000_000,
};

export const WORKSPACE = '/workspace';

/**
 * A client's path as an absolute path inside the sandbox's workspace, or INVALID_INPUT: relative
 * paths are taken from `/workspace`, and nothing may lead out of it (`..`, another absolute path).
 */
export function workspacePath(input: string, field = 'path'): string {
  if (input.includes('\0')) throw new AirlockError('INVALID_INPUT', `The ${field} contains a NUL byte.`, { field });
  const resolved = path.posix.resolve(WORKSPACE, input.replace(/\\/g, '/'));
  if (resolved !== WORKSPACE && !resolved.startsWith(`${WORKSPACE}/`)) {
    throw new AirlockError('INVALID_INPUT', `${JSON.stringify(input.slice(0, 200))} is outside the workspace; paths are relative to ${WORKSPACE} (or absolute under it).`, { field });
  }
  return resolved;
}

/**
 * `text` cut to about `bytes` of UTF-8: the first and last half with the middle left out and said so
 * (where the whole is, in `where`). Text within the cap is returned as it is.
 */
export function headAndTail(text: string, bytes: number, where: string): { text: string; cut: boolean } {
  const buf = Buffer.from(text, 'utf8');
  if (buf.length <= bytes) return { text, cut: false };
  const half = Math.floor(bytes / 2);
  // Cut on character boundaries: a split UTF-8 sequence would show as replacement characters.
  const head = buf.subarray(0, half).toString('utf8').replace(/\uFFFD$/, '');
  const tail = buf.subarray(buf.length - half).toString('utf8').replace(/^\uFFFD/, '');
  return { text: `${head}\n… [${buf.length - 2 * half} bytes left out here; ${where}] …\n${tail}`, cut: true };
}
