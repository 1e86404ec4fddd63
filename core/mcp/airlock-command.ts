import { access, constants } from 'node:fs/promises';
import path from 'node:path';
import type { ResourcePaths } from '../common/resources';

/** How an MCP client starts this Airlock's `airlock mcp` (docs/architecture.md §17). */
export interface AirlockCommand {
  command: string;
  /** Arguments before `mcp`. */
  args: string[];
  /** `airlock` is on the PATH of the process that asked (a bare `airlock` works in the user's shell too). */
  onPath: boolean;
}

async function executable(file: string): Promise<boolean> {
  return access(file, constants.X_OK).then(() => true, () => false);
}

/** The first executable `name` on `PATH`, or undefined. */
export async function which(name: string, env: NodeJS.ProcessEnv): Promise<string | undefined> {
  for (const dir of (env.PATH ?? '').split(path.delimiter).filter(Boolean)) {
    const file = path.join(dir, name);
    if (await executable(file)) return file;
  }
  return undefined;
}

/**
 * The command for the setup lines. A bare `airlock` only when it is on the PATH; else this checkout's
 * `bin/airlock.js` run by an absolute Node (this process's own when it is Node, not Electron), so a
 * line copied after the README's install works as pasted.
 */
export async function resolveAirlockCommand(paths: Pick<ResourcePaths, 'appRoot' | 'packaged'>, env: NodeJS.ProcessEnv, runtime: { execPath: string; electron: boolean } = { execPath: process.execPath, electron: Boolean(process.versions.electron) }): Promise<AirlockCommand> {
  const onPath = await which('airlock', env);
  if (onPath) return { command: 'airlock', args: [], onPath: true };
  const bin = path.join(paths.appRoot, 'bin', 'airlock.js');
  if (!paths.packaged && (await access(bin).then(() => true, () => false))) {
    const node = runtime.electron ? await which('node', env) : runtime.execPath;
    if (node) return { command: node, args: [bin], onPath: false };
  }
  return { command: 'airlock', args: [], onPath: false };
}
