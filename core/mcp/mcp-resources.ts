import { open, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { ResourceTemplate, type McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { ErrorCode, McpError, type ReadResourceResult } from '@modelcontextprotocol/sdk/types.js';
import { AirlockError, toErrorInfo } from '../../contracts/errors';
import { RunId } from '../../contracts/ids';
import type { AirlockCore } from '../app';
import type { McpLimits } from './mcp-limits';
import type { McpDeps } from './mcp-server';

/** Terminal escape codes (colours, cursor moves, titles) and carriage-return overdraws, left out of plain text. */
const ESCAPES = /\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[PX^_][^\x1b]*\x1b\\|\x1b[@-Z\\-_]|[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f]/g;
/** A terminal log as plain text: escape codes left out, a line overdrawn by carriage returns as its last state. */
export function plainTerminalText(text: string): string {
  return text.replace(ESCAPES, '').replace(/\r+\n/g, '\n').replace(/^.*\r(?!$)/gm, '');
}

/** A run's terminal log, events, diff and audit verification, as `airlock://runs/<id>/…` resources. */
export function registerRunResources(server: McpServer, ready: () => Promise<McpDeps>, limits: McpLimits): void {
  const runIdOf = (v: string | string[] | undefined) => {
    const id = Array.isArray(v) ? v[0] : v;
    if (!id || !RunId.safeParse(id).success) throw new AirlockError('INVALID_INPUT', `'${String(id).slice(0, 80)}' is not a run id.`);
    return id;
  };
  const text = (uri: URL, body: string, mimeType = 'text/plain') => ({ contents: [{ uri: uri.href, mimeType, text: body }] });
  const template = (kind: string) => new ResourceTemplate(`airlock://runs/{runId}/${kind}`, { list: undefined });
  type Read = (uri: URL, vars: Record<string, string | string[]>) => Promise<ReadResourceResult>;
  const register = (name: string, kind: string, meta: { description: string; mimeType: string }, read: Read) =>
    server.registerResource(name, template(kind), meta, async (uri, vars) => {
      try {
        return await read(uri, vars);
      } catch (err) {
        throw resourceError(uri, err);
      }
    });

  register('run-terminal', 'terminal', { description: "A run's terminal log as plain text (escape codes left out; the last part past the cap)", mimeType: 'text/plain' }, async (uri, vars) => {
    const { core } = await ready();
    const id = runIdOf(vars.runId);
    await core.store.get(id);
    const file = path.join(core.store.paths(id).dir, 'terminal.log');
    const size = await stat(file).then((s) => s.size, () => 0);
    const from = Math.max(0, size - limits.patchBytes);
    // No log yet (the sandbox printed nothing): an empty terminal.
    const handle = await open(file, 'r').catch(() => undefined); // no terminal log yet: the resource is empty
    if (!handle) return text(uri, '');
    try {
      const buf = Buffer.alloc(size - from);
      await handle.read(buf, 0, buf.length, from);
      return text(uri, plainTerminalText(buf.toString('utf8')));
    } finally {
      await handle.close();
    }
  });
  server.registerResource('run-command-output', new ResourceTemplate('airlock://runs/{runId}/output/{command}/{stream}', { list: undefined }), { description: "The output a sandbox_exec kept (up to the cap, head and tail) when its result carried only part of it", mimeType: 'text/plain' }, async (uri, vars) => {
    try {
      const { core } = await ready();
      const id = runIdOf(vars.runId);
      const n = Number(vars.command);
      const stream = vars.stream;
      if (!Number.isSafeInteger(n) || n < 1 || (stream !== 'stdout' && stream !== 'stderr')) throw new AirlockError('INVALID_INPUT', `${uri.href} names no command output (…/output/<n>/stdout|stderr).`);
      const body = await readFile(commandOutputFile(core, id, n, stream), 'utf8').catch(() => {
        throw new AirlockError('NOT_FOUND', `No kept output at ${uri.href}: only a sandbox_exec whose result was cut keeps one.`);
      });
      return text(uri, body);
    } catch (err) {
      throw resourceError(uri, err);
    }
  });
  register('run-events', 'events', { description: "A run's events (JSON)", mimeType: 'application/json' }, async (uri, vars) => {
    const { services } = await ready();
    const page = await services.runs.events({ runId: runIdOf(vars.runId), afterSeq: -1, limit: 5000 });
    return text(uri, JSON.stringify(page.events), 'application/json');
  });
  register('run-diff', 'diff', { description: "A finished run's result patch", mimeType: 'text/x-diff' }, async (uri, vars) => {
    const { services } = await ready();
    const whole = await services.diffs.preview({ runId: runIdOf(vars.runId) });
    return text(uri, (whole.text ?? '').slice(0, limits.patchBytes), 'text/x-diff');
  });
  register('run-audit', 'audit', { description: "Verification of a run's hash-chained audit log (JSON)", mimeType: 'application/json' }, async (uri, vars) => {
    const { services } = await ready();
    const result = await services.audit.verify({ runId: runIdOf(vars.runId) });
    return text(uri, JSON.stringify(result), 'application/json');
  });
}

/** Where a sandbox_exec's kept output lives: in the run's folder, so History keeps it with the run. */
export function commandOutputFile(core: AirlockCore, runId: string, command: number, stream: 'stdout' | 'stderr'): string {
  return path.join(core.store.paths(runId).dir, 'mcp-output', `${command}.${stream}.txt`);
}

/** MCP's code for a resource that does not exist (the specification's "Resource not found"). */
export const RESOURCE_NOT_FOUND = -32002;

/**
 * A failed resource read as a JSON-RPC error with the specification's code: no such run is -32002
 * (with the URI in `data`), a malformed run id -32602, anything else -32603, each with Airlock's message.
 */
function resourceError(uri: URL, err: unknown): McpError {
  const info = toErrorInfo(err);
  const code = info.kind === 'NOT_FOUND' ? RESOURCE_NOT_FOUND : info.kind === 'INVALID_INPUT' ? ErrorCode.InvalidParams : ErrorCode.InternalError;
  return new McpError(code, info.message, { uri: uri.href });
}
