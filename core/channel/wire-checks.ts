/**
 * Checks on what the helper sends. The helper is Airlock's code, but it shares a user with whatever
 * runs in the sandbox, so its output is treated as untrusted: anything malformed throws, which
 * closes the channel (see Mux) instead of reaching callers as odd values.
 */
import type { FileEntry, HelperHello } from './channel-client';
import type { WireError, WireExit } from './protocol';

function fail(what: string): never {
  throw new Error(`malformed ${what} from the sandbox helper`);
}

const isInt = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v);
const isNum = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);
const isStr = (v: unknown, max = 4096): v is string => typeof v === 'string' && v.length <= max;
const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

export function checkHello(m: Record<string, unknown>): HelperHello {
  if (!isStr(m.version, 64) || !isStr(m.node, 64) || !isInt(m.uid) || !isInt(m.agentUid) || !isInt(m.pid) || typeof m.pty !== 'boolean') fail('hello');
  return { version: m.version, node: m.node, uid: m.uid, agentUid: m.agentUid, pid: m.pid, pty: m.pty };
}

export function checkError(e: unknown): WireError {
  if (!isObj(e) || !isStr(e.kind, 64) || typeof e.message !== 'string') fail('error');
  return { kind: e.kind, message: e.message.slice(0, 4000) };
}

export function checkExit(info: unknown): WireExit {
  if (!isObj(info)) fail('exit');
  const { exitCode, signal, timedOut, truncated, durationMs, outputBytes } = info;
  if (exitCode !== null && !isInt(exitCode)) fail('exit code');
  if (signal !== null && !isStr(signal, 32)) fail('exit signal');
  if (typeof timedOut !== 'boolean' || typeof truncated !== 'boolean' || !isNum(durationMs) || !isNum(outputBytes)) fail('exit');
  return { exitCode, signal, timedOut, truncated, durationMs, outputBytes };
}

const ENTRY_TYPES = new Set(['file', 'dir', 'symlink', 'other']);

export function checkEntries(value: unknown): FileEntry[] {
  if (!Array.isArray(value)) fail('listing');
  return value.map((e: unknown) => {
    if (!isObj(e) || !isStr(e.name) || !ENTRY_TYPES.has(e.type as string) || !isNum(e.size) || !isInt(e.mode)) fail('listing entry');
    return { name: e.name, type: e.type as FileEntry['type'], size: e.size, mode: e.mode };
  });
}

export function checkPaths(value: unknown): string[] {
  if (!Array.isArray(value) || !value.every((p) => isStr(p))) fail('watch batch');
  return value as string[];
}

export function checkPort(value: unknown): number {
  if (!isObj(value) || !isInt(value.port) || value.port < 1 || value.port > 65535) fail('port');
  return value.port;
}
