import { execFile } from 'node:child_process';
import { mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { AgentConfig } from './config';
import { emit } from './events';
import type { ToolSpec } from './model';
import type { CommandResult } from './approvals';
import { commandEnv } from '../../../core/common/command-env';

export const TOOLS: ToolSpec[] = [
  {
    name: 'run_command',
    description: 'Run a shell command with bash -lc in the workspace. Returns exit code and combined output (long output is cut in the middle). Use for building, testing, git, etc.',
    schema: {
      type: 'object',
      properties: {
        command: { type: 'string', description: 'The command line.' },
        timeout_seconds: { type: 'integer', description: 'Kill the command after this many seconds (default and maximum set by Airlock).' },
      },
      required: ['command'],
    },
  },
  {
    name: 'read_file',
    description: 'Read a text file, optionally a range of lines (1-based, inclusive). Lines are returned with their numbers.',
    schema: {
      type: 'object',
      properties: {
        path: { type: 'string', description: 'Path relative to the workspace.' },
        start_line: { type: 'integer' },
        end_line: { type: 'integer' },
      },
      required: ['path'],
    },
  },
  {
    name: 'write_file',
    description: 'Create or overwrite a file with the given content (parent folders are created).',
    schema: {
      type: 'object',
      properties: { path: { type: 'string' }, content: { type: 'string' } },
      required: ['path', 'content'],
    },
  },
  {
    name: 'edit_file',
    description: 'Replace one exact occurrence of old_text with new_text in a file. old_text must match exactly once (include surrounding lines to make it unique).',
    schema: {
      type: 'object',
      properties: { path: { type: 'string' }, old_text: { type: 'string' }, new_text: { type: 'string' } },
      required: ['path', 'old_text', 'new_text'],
    },
  },
  {
    name: 'list_files',
    description: 'List files and folders under a path (default: the workspace root), recursively up to max_depth (default 3). Skips .git and node_modules.',
    schema: {
      type: 'object',
      properties: { path: { type: 'string' }, max_depth: { type: 'integer' } },
    },
  },
  {
    name: 'search',
    description: 'Search file contents with a regular expression (ripgrep). Returns matching lines as path:line:text.',
    schema: {
      type: 'object',
      properties: {
        pattern: { type: 'string' },
        path: { type: 'string', description: 'Folder or file to search (default: workspace root).' },
        glob: { type: 'string', description: "Only files matching this glob, e.g. '*.ts'." },
      },
      required: ['pattern'],
    },
  },
  {
    name: 'finish',
    description: 'Call when the task is done (or cannot be done), with a short summary of what you changed and why.',
    schema: { type: 'object', properties: { summary: { type: 'string' } }, required: ['summary'] },
  },
];

/** What a tool returns to the loop. `finished` is set by `finish`. */
export interface ToolOutcome {
  ok: boolean;
  output: string;
  truncated?: boolean;
  finished?: string;
}

class ToolError extends Error {}

function str(input: Record<string, unknown>, key: string, required = true): string | undefined {
  const v = input[key];
  if (v === undefined || v === null) {
    if (required) throw new ToolError(`missing required argument '${key}'`);
    return undefined;
  }
  if (typeof v !== 'string') throw new ToolError(`argument '${key}' must be a string`);
  return v;
}

function num(input: Record<string, unknown>, key: string): number | undefined {
  const v = input[key];
  if (v === undefined || v === null) return undefined;
  const n = typeof v === 'string' ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isFinite(n)) throw new ToolError(`argument '${key}' must be a number`);
  return Math.floor(n);
}

/** Resolves a tool path inside the workspace; paths that leave it are refused. */
export function resolveInWorkspace(workspace: string, p: string | undefined): string {
  const root = path.resolve(workspace);
  const full = path.resolve(root, p ?? '.');
  if (full !== root && !full.startsWith(root + path.sep)) throw new ToolError(`path '${p}' is outside the workspace ${root}`);
  return full;
}

function rel(workspace: string, full: string): string {
  return path.relative(path.resolve(workspace), full) || '.';
}

function cap(text: string, limit: number): { text: string; truncated: boolean } {
  if (text.length <= limit) return { text, truncated: false };
  return { text: `${text.slice(0, limit)}\n… [cut: ${text.length - limit} more characters]`, truncated: true };
}

export interface ToolContext {
  config: AgentConfig;
  /** Asks for approval of a command (mode `ask`); resolves true in mode `auto`. */
  approve(id: string, command: string): Promise<boolean>;
  /** Runs a command on the host's side (host-run commands): the host streams its output and answers with the result. */
  runCommand(req: { id: string; command: string; cwd: string; timeoutSec: number; capBytes: number }): Promise<CommandResult>;
}

/** Runs one tool call. Errors become `{ ok: false, output: <message for the model> }`. */
export async function runTool(id: string, name: string, rawInput: unknown, ctx: ToolContext): Promise<ToolOutcome> {
  const { config } = ctx;
  const ws = config.workspace;
  const input = (rawInput && typeof rawInput === 'object' && !Array.isArray(rawInput) ? rawInput : {}) as Record<string, unknown>;
  try {
    switch (name) {
      case 'run_command': {
        const command = str(input, 'command')!;
        const timeout = Math.min(num(input, 'timeout_seconds') ?? config.commandTimeoutSec, config.commandTimeoutSec);
        if (!(await ctx.approve(id, command))) return { ok: false, output: 'The user denied this command. Do not retry it; find another way or finish.' };
        const timeoutSec = Math.max(1, timeout);
        const r = await ctx.runCommand({ id, command, cwd: ws, timeoutSec, capBytes: config.outputCapChars });
        const status = r.timedOut ? `timed out after ${timeout}s (killed)` : r.exitCode === null ? 'killed by a signal' : `exit code ${r.exitCode}`;
        return { ok: r.exitCode === 0 && !r.timedOut, output: `${status}\n${r.output}`, truncated: r.truncated };
      }
      case 'read_file': {
        const full = resolveInWorkspace(ws, str(input, 'path'));
        const raw = await readFile(full);
        if (raw.subarray(0, 8192).includes(0)) return { ok: false, output: `error: ${rel(ws, full)} is a binary file (${raw.length} bytes); inspect it with run_command (xxd, file, …)` };
        const text = raw.toString('utf8');
        const lines = text.split('\n');
        if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
        const start = Math.max(1, num(input, 'start_line') ?? 1);
        const end = Math.min(lines.length, num(input, 'end_line') ?? lines.length);
        if (start > lines.length && lines.length > 0) throw new ToolError(`start_line ${start} is past the end of the file (${lines.length} lines)`);
        const body = lines.slice(start - 1, end).map((l, i) => `${start + i}\t${l}`).join('\n');
        const c = cap(body, config.outputCapChars);
        return { ok: true, output: c.text || '(empty file)', truncated: c.truncated };
      }
      case 'write_file': {
        const full = resolveInWorkspace(ws, str(input, 'path'));
        const content = str(input, 'content')!;
        await mkdir(path.dirname(full), { recursive: true });
        await writeFile(full, content);
        emit({ type: 'file_changed', paths: [rel(ws, full)] });
        return { ok: true, output: `wrote ${Buffer.byteLength(content)} bytes to ${rel(ws, full)}` };
      }
      case 'edit_file': {
        const full = resolveInWorkspace(ws, str(input, 'path'));
        const oldText = str(input, 'old_text')!;
        const newText = str(input, 'new_text')!;
        if (oldText === '') throw new ToolError('old_text is empty; use write_file to create a file');
        const text = await readFile(full, 'utf8');
        const first = text.indexOf(oldText);
        if (first < 0) throw new ToolError(`old_text was not found in ${rel(ws, full)}; read the file and copy the exact text (whitespace included)`);
        let count = 0;
        for (let i = first; i >= 0; i = text.indexOf(oldText, i + oldText.length)) count++;
        if (count > 1) throw new ToolError(`old_text matches ${count} times in ${rel(ws, full)}; include more surrounding lines so it matches exactly once`);
        await writeFile(full, text.slice(0, first) + newText + text.slice(first + oldText.length));
        emit({ type: 'file_changed', paths: [rel(ws, full)] });
        return { ok: true, output: `edited ${rel(ws, full)}` };
      }
      case 'list_files': {
        const root = resolveInWorkspace(ws, str(input, 'path', false));
        const depth = Math.max(1, Math.min(10, num(input, 'max_depth') ?? 3));
        const out: string[] = [];
        await walk(root, ws, depth, out, 2000);
        const c = cap(out.join('\n'), config.outputCapChars);
        return { ok: true, output: c.text || '(empty)', truncated: c.truncated || out.length >= 2000 };
      }
      case 'search': {
        const pattern = str(input, 'pattern')!;
        const target = resolveInWorkspace(ws, str(input, 'path', false));
        const glob = str(input, 'glob', false);
        const r = await search(pattern, target, glob, ws);
        const c = cap(r, config.outputCapChars);
        return { ok: true, output: c.text || 'no matches', truncated: c.truncated };
      }
      case 'finish':
        return { ok: true, output: 'finished', finished: str(input, 'summary', false) ?? '' };
      default:
        return { ok: false, output: `unknown tool '${name}'; the tools are ${TOOLS.map((t) => t.name).join(', ')}` };
    }
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (e.code === 'ENOENT') return { ok: false, output: `error: no such file or folder: ${e.path ? rel(ws, e.path) : ''}` };
    if (e.code === 'EISDIR') return { ok: false, output: 'error: that is a folder; use list_files' };
    return { ok: false, output: `error: ${e.message}` };
  }
}

async function walk(dir: string, ws: string, depth: number, out: string[], limit: number): Promise<void> {
  if (out.length >= limit) return;
  const st = await stat(dir);
  if (!st.isDirectory()) {
    out.push(rel(ws, dir));
    return;
  }
  const entries = await readdir(dir, { withFileTypes: true });
  entries.sort((a, b) => a.name.localeCompare(b.name));
  for (const e of entries) {
    if (out.length >= limit) return;
    if (e.name === '.git' || e.name === 'node_modules') continue;
    const full = path.join(dir, e.name);
    out.push(e.isDirectory() ? `${rel(ws, full)}/` : rel(ws, full));
    if (e.isDirectory() && depth > 1) await walk(full, ws, depth - 1, out, limit);
  }
}

function execOut(cmd: string, args: string[], cwd: string): Promise<{ code: number | null; stdout: string; stderr: string; missing: boolean }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { cwd, maxBuffer: 16 * 1024 * 1024, timeout: 60_000, env: commandEnv(process.env) }, (err, stdout, stderr) => {
      const e = err as (NodeJS.ErrnoException & { code?: unknown }) | null;
      resolve({ code: e ? (typeof e.code === 'number' ? e.code : null) : 0, stdout: String(stdout), stderr: String(stderr), missing: e?.code === 'ENOENT' });
    });
  });
}

async function search(pattern: string, target: string, glob: string | undefined, ws: string): Promise<string> {
  const relTarget = rel(ws, target);
  const rgArgs = ['--line-number', '--no-heading', '--color=never', '--max-columns=300', '--max-count=200'];
  if (glob) rgArgs.push('--glob', glob);
  rgArgs.push('--', pattern, relTarget);
  const rg = await execOut('rg', rgArgs, ws);
  if (!rg.missing) {
    // Exit 2 with matches means some files could not be read: the matches still count.
    if (rg.code === 0 || rg.code === 1 || (rg.code === 2 && rg.stdout)) return rg.stdout.trimEnd();
    throw new ToolError(rg.stderr.trim() || `ripgrep failed (exit ${rg.code})`);
  }
  // No ripgrep (a custom image): grep does the same job, slower.
  const grepArgs = ['-rnIE', '--exclude-dir=.git', '--exclude-dir=node_modules'];
  if (glob) grepArgs.push(`--include=${glob}`);
  grepArgs.push('--', pattern, relTarget);
  const g = await execOut('grep', grepArgs, ws);
  if (g.code === 0 || g.code === 1) return g.stdout.trimEnd();
  throw new ToolError(g.stderr.trim() || `grep failed (exit ${g.code})`);
}
