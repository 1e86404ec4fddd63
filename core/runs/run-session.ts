import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { AirlockError } from '../../contracts/errors';
import type { AgentSessionFiles } from '../agents';
import { parseStoredJson } from '../common/stored-json';
import { parseHostileTar } from '../workspace/hostile-tar';
import { unsafePathReason } from '../workspace/result-paths';
import { TarWriter } from '../workspace/tar-writer';
import type { WorkspaceShell } from '../workspace/workspace-shell';
import { writeDurably } from '../common/stored-file';

/**
 * An agent's session files, carried from a finished turn's sandbox into the next turn's
 * (docs/architecture.md §15). They are sandbox output, so hostile: only files the agent's spec
 * names, read as one tar of exactly those names and parsed on the host (hostile-tar.ts), capped in
 * count and size, the run token replaced. The host never interprets them: they are opaque bytes
 * that only ever go back into a sandbox.
 */

/** At most this many files, and this many bytes together, cross. */
export const SESSION_MAX_FILES = 8;
export const SESSION_MAX_BYTES = 32 * 1024 * 1024;
const PLACEHOLDER = 'airlock-redacted-run-token';

export const CarriedSession = z.object({
  version: z.literal(1),
  /** The id the host chose for the conversation (an agent that takes one resumes by it). */
  id: z.string().regex(/^[0-9a-f-]{36}$/),
  files: z
    .array(z.object({ path: z.string().min(1).max(1024), bytes: z.number().int().nonnegative(), sha256: z.string().regex(/^[0-9a-f]{64}$/), data: z.string() }))
    .max(SESSION_MAX_FILES),
});
export type CarriedSession = z.infer<typeof CarriedSession>;

/**
 * Reads an agent's session files out of a sandbox. Returns undefined when there are none (the agent
 * kept no conversation); throws on an archive that breaks the rules (nothing of it is kept).
 */
export async function captureSession(shell: WorkspaceShell, spec: AgentSessionFiles, id: string, runToken: Buffer | undefined): Promise<CarriedSession | undefined> {
  const listing = await shell.run({
    argv: ['sh', '-c', 'cd "$1" 2>/dev/null || exit 0; exec find . -type f -size -"$2"c -printf "%P\\0"', 'sh', spec.dir, String(SESSION_MAX_BYTES + 1)],
    maxOutputBytes: 1024 * 1024,
    timeoutMs: 60_000,
  });
  const names = listing.stdout
    .toString('utf8')
    .split('\0')
    .filter((p) => p && !unsafePathReason(p) && spec.matches(p, id))
    .sort()
    .slice(0, SESSION_MAX_FILES);
  if (!names.length) return undefined;
  const res = await shell.run({
    argv: ['tar', '-c', '-f', '-', '--format=pax', '--null', '--no-recursion', '--ignore-failed-read', '--verbatim-files-from', '-C', spec.dir, '-T', '-'],
    stdin: `${names.join('\0')}\0`,
    maxOutputBytes: SESSION_MAX_BYTES + 1024 * 1024,
    timeoutMs: 5 * 60_000,
  });
  if (res.stdout.length > SESSION_MAX_BYTES + 1024 * 1024) throw new AirlockError('SANDBOX_FAILED', `The agent's session files exceed ${SESSION_MAX_BYTES} bytes; the conversation is not kept for a follow-up.`);
  const parsed = parseHostileTar(res.stdout, { wanted: new Set(names), maxFileBytes: SESSION_MAX_BYTES });
  const files: CarriedSession['files'] = [];
  let total = 0;
  for (const name of names) {
    const f = parsed.files.get(name);
    if (f?.kind !== 'file') continue;
    const content = runToken ? replaceAll(f.content, runToken) : f.content;
    total += content.length;
    if (total > SESSION_MAX_BYTES) throw new AirlockError('SANDBOX_FAILED', `The agent's session files exceed ${SESSION_MAX_BYTES} bytes; the conversation is not kept for a follow-up.`);
    files.push({ path: name, bytes: content.length, sha256: createHash('sha256').update(content).digest('hex'), data: content.toString('base64') });
  }
  return files.length ? { version: 1, id, files } : undefined;
}

/** Puts a carried session back into a (new) sandbox, where the agent's spec says it lives. */
export async function restoreSession(shell: WorkspaceShell, spec: AgentSessionFiles, session: CarriedSession): Promise<void> {
  const tar = new TarWriter();
  const mtime = new Date();
  const producing = (async () => {
    for (const f of session.files) {
      // Checked again: the stored copy is on disk between the turns.
      if (unsafePathReason(f.path) || !spec.matches(f.path, session.id)) throw new AirlockError('INVALID_INPUT', `The stored session holds an unexpected file (${f.path.slice(0, 100)}); start a fresh run instead.`);
      const content = Buffer.from(f.data, 'base64');
      await tar.add({ name: f.path, type: 'file', mode: 0o600, size: content.length, mtime }, content);
    }
    await tar.finish();
  })();
  producing.catch((err: unknown) => tar.stream.destroy(err as Error));
  const res = await shell.run({ argv: ['sh', '-c', 'mkdir -p "$1" && exec tar -x -f - -C "$1"', 'sh', spec.dir], stdin: tar.stream, timeoutMs: 5 * 60_000 });
  await producing;
  if (res.exitCode !== 0) throw new AirlockError('SANDBOX_FAILED', `Putting the agent's session files in place failed: ${res.stderr.toString('utf8').trim().slice(-300) || `exit ${res.exitCode}`}.`);
}

export async function saveSession(file: string, session: CarriedSession): Promise<void> {
  await writeDurably(file, JSON.stringify(session));
}

/**
 * A stored session, or undefined when there is none. A damaged one is INVALID_INPUT naming the file
 * and field: continuing would otherwise start the agent's conversation afresh without saying so.
 */
export async function loadSession(file: string): Promise<CarriedSession | undefined> {
  const text = await readFile(file, 'utf8').catch(() => undefined); // no file: no stored session
  if (text === undefined) return undefined;
  return parseStoredJson(CarriedSession, file, text, "the agent's conversation cannot be carried over; start a new run with the task instead of continuing.");
}

/** `data` with every occurrence of `needle` replaced (the run token: one never crosses into another sandbox). */
function replaceAll(data: Buffer, needle: Buffer): Buffer {
  if (!needle.length || data.indexOf(needle) < 0) return data;
  const parts: Buffer[] = [];
  let from = 0;
  for (let at = data.indexOf(needle); at >= 0; at = data.indexOf(needle, from)) {
    parts.push(data.subarray(from, at), Buffer.from(PLACEHOLDER));
    from = at + needle.length;
  }
  parts.push(data.subarray(from));
  return Buffer.concat(parts);
}
