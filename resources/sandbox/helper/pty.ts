/**
 * node-pty, loaded lazily from the image (`/opt/airlock/node_modules`, next to the helper bundle).
 * Node has no PTY of its own; without node-pty, PTY spawns fail with a clear error and pipes work.
 */
import { createRequire } from 'node:module';
import { HelperError } from './errors';

/** The part of node-pty's IPty the helper uses. */
export interface PtyProcess {
  readonly pid: number;
  onData(listener: (data: string | Buffer) => void): void;
  onExit(listener: (e: { exitCode: number; signal?: number }) => void): void;
  write(data: string): void;
  resize(cols: number, rows: number): void;
  pause(): void;
  resume(): void;
  kill(signal?: string): void;
}

export interface NodePty {
  spawn(
    file: string,
    args: string[],
    opts: { name: string; cols: number; rows: number; cwd: string; env: Record<string, string>; encoding: null; uid?: number; gid?: number },
  ): PtyProcess;
}

function searchBases(): string[] {
  const bases: string[] = [];
  if (process.argv[1]) bases.push(process.argv[1]);
  bases.push('/opt/airlock/helper.js');
  return bases;
}

let resolved: string | null | undefined;

/** Where node-pty would load from, or null; cheap (no module is loaded). */
export function resolveNodePty(): string | null {
  if (resolved !== undefined) return resolved;
  resolved = null;
  for (const base of searchBases()) {
    try {
      resolved = createRequire(base).resolve('node-pty');
      break;
    } catch {
      // Try the next place.
    }
  }
  return resolved;
}

let loaded: NodePty | undefined;

export function loadNodePty(): NodePty {
  if (loaded) return loaded;
  const where = resolveNodePty();
  if (!where) {
    throw new HelperError(
      'IMAGE_INCOMPATIBLE',
      'PTY unavailable: node-pty is not installed in the sandbox image (expected under /opt/airlock/node_modules); ' +
        'rebuild the Airlock image or spawn without pty',
    );
  }
  loaded = createRequire(where)(where) as NodePty;
  return loaded;
}
