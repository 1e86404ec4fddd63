import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { AgentSessionFiles } from '../agents';
import { claudeCodeAdapter } from '../agents/claude-code-adapter';
import { codexAdapter } from '../agents/codex-adapter';
import { LocalShell } from '../workspace/local-shell';
import { captureSession, loadSession, restoreSession, saveSession, SESSION_MAX_FILES } from './run-session';

const ID = '0b6f3a52-1c1e-4a59-9d7e-5d2f8f1c0a11';
const TOKEN = Buffer.from(`airlock-run-token-${'ab'.repeat(32)}`);
const shell = new LocalShell(process.env);
let dir: string;
let spec: AgentSessionFiles;

beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-session-'));
  spec = { dir: path.join(dir, 'sandbox-side'), matches: (rel, id) => rel === `${id}.jsonl` || /^sub\/[a-z]+\.jsonl$/.test(rel) };
  await mkdir(path.join(spec.dir, 'sub'), { recursive: true });
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('agent session files carried between turns (hostile sandbox output)', () => {
  it('takes only the files the spec names, removes the run token, and puts them back byte for byte', async () => {
    await writeFile(path.join(spec.dir, `${ID}.jsonl`), `{"a":"${TOKEN.toString()}","b":"keep"}\n`);
    await writeFile(path.join(spec.dir, 'sub', 'one.jsonl'), 'second file\n');
    await writeFile(path.join(spec.dir, 'other-session.jsonl'), 'not this one\n');
    await writeFile(path.join(spec.dir, 'settings.json'), '{"apiKeyHelper":"curl evil"}\n');
    // A symlink with a wanted name is not a file: never followed, never carried.
    await writeFile(path.join(dir, 'host-secret'), 'host secret\n');
    await symlink(path.join(dir, 'host-secret'), path.join(spec.dir, 'sub', 'link.jsonl'));

    const session = await captureSession(shell, spec, ID, TOKEN);
    expect(session?.files.map((f) => f.path)).toEqual([`${ID}.jsonl`, 'sub/one.jsonl']);
    const first = Buffer.from(session!.files[0]!.data, 'base64').toString();
    expect(first).not.toContain(TOKEN.toString());
    expect(first).toContain('airlock-redacted-run-token');
    expect(first).toContain('"b":"keep"');

    const file = path.join(dir, 'session.json');
    await saveSession(file, session!);
    const loaded = await loadSession(file);
    expect(loaded).toEqual(session);

    const next = { ...spec, dir: path.join(dir, 'next-sandbox') };
    await restoreSession(shell, next, loaded!);
    expect(await readFile(path.join(next.dir, `${ID}.jsonl`), 'utf8')).toBe(first);
    expect(await readFile(path.join(next.dir, 'sub', 'one.jsonl'), 'utf8')).toBe('second file\n');
  });

  it('keeps nothing when the agent left no session, caps the count, refuses a tampered store and names a damaged one', async () => {
    expect(await captureSession(shell, spec, ID, TOKEN)).toBeUndefined();
    for (const n of 'abcdefghijkl') await writeFile(path.join(spec.dir, 'sub', `${n}.jsonl`), n);
    expect((await captureSession(shell, spec, ID, TOKEN))?.files).toHaveLength(SESSION_MAX_FILES);

    const file = path.join(dir, 'session.json');
    await writeFile(file, JSON.stringify({ version: 1, id: ID, files: [{ path: '../../etc/profile', bytes: 1, sha256: 'a'.repeat(64), data: 'eA==' }] }));
    const tampered = await loadSession(file);
    await expect(restoreSession(shell, spec, tampered!)).rejects.toThrow(/unexpected file/);
    await writeFile(file, 'not json');
    await expect(loadSession(file)).rejects.toMatchObject({ kind: 'INVALID_INPUT', message: expect.stringContaining(`${file} is damaged: not valid JSON`) });
    await writeFile(file, JSON.stringify({ version: 1, id: ID, files: [{ path: 'a.jsonl', bytes: -1, sha256: 'a'.repeat(64), data: '' }] }));
    await expect(loadSession(file)).rejects.toMatchObject({ kind: 'INVALID_INPUT', message: expect.stringContaining(`${file} is damaged: field files.0.bytes`) });
    expect(await loadSession(path.join(dir, 'none.json'))).toBeUndefined();
  });

  it('names exactly the session files of Claude Code and Codex', () => {
    const claude = claudeCodeAdapter.session!;
    expect(claude.matches(`-workspace/${ID}.jsonl`, ID)).toBe(true);
    expect(claude.matches(`-workspace/${'1'.repeat(36)}.jsonl`, ID)).toBe(false);
    expect(claude.matches('settings.json', ID)).toBe(false);
    const codex = codexAdapter.session!;
    expect(codex.matches(`2026/11/30/rollout-2026-11-30T23-00-00-${ID}.jsonl`, ID)).toBe(true);
    expect(codex.matches('config.toml', ID)).toBe(false);
    expect(codex.matches('2026/11/30/../../x.jsonl', ID)).toBe(false);
  });
});
