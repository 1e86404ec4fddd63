import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ApplyApprovals } from './apply-approvals';
import { debugLog } from '../common/debug-log';

const REQ = { runId: 'r-abc123-0123abcd', client: 'test 1', projectDir: '/p', target: '/p', mode: 'working-tree' as const, files: ['a.txt'], reviewedSha256: 'a'.repeat(64), patchBytes: 10 };

describe('ApplyApprovals (shared by airlock mcp and the app through files)', () => {
  let home: string;
  beforeEach(async () => {
    home = await mkdtemp(path.join(os.tmpdir(), 'airlock-approvals-'));
  });
  afterEach(async () => {
    await rm(home, { recursive: true, force: true });
  });

  it('a request is listed by another instance, answered once, and forgotten when settled', async () => {
    const server = new ApplyApprovals(home);
    const app = new ApplyApprovals(home);
    const req = await server.request(REQ);
    expect((await app.pending()).map((r) => r.requestId)).toEqual([req.requestId]);
    const waiting = server.wait(req.requestId);
    expect(await app.answer(req.requestId, true)).toBe(true);
    expect(await app.answer(req.requestId, false)).toBe(false);
    expect(await waiting).toBe('approved');
    expect(await app.pending()).toEqual([]);
    expect(await readdir(server.dir)).toEqual([]);
  });

  it('refusal, expiry and unknown ids', async () => {
    const a = new ApplyApprovals(home);
    const refused = await a.request(REQ);
    const w = a.wait(refused.requestId);
    await a.answer(refused.requestId, false);
    expect(await w).toBe('refused');
    const short = await a.request(REQ, 300);
    expect(await a.wait(short.requestId)).toBe('expired');
    expect(await a.answer(short.requestId, true)).toBe(false);
    expect(await a.answer('../../etc/passwd', true)).toBe(false);
    expect(await a.answer('f'.repeat(32), true)).toBe(false);
  });

  it('a damaged request is never pending or answerable, a damaged answer is a refusal, and the debug log names the file', async () => {
    const server = new ApplyApprovals(home);
    const req = await server.request(REQ);
    const requestFile = path.join(server.dir, `${req.requestId}.request.json`);
    await writeFile(requestFile, JSON.stringify({ ...req, files: 'a.txt' }));
    expect(await server.pending()).toEqual([]);
    expect(await server.answer(req.requestId, true)).toBe(false);
    expect(debugLog.recent().at(-1)).toMatchObject({ where: 'mcp.applyRequest', message: expect.stringContaining(`${requestFile} is damaged: field files`) });

    const other = await server.request(REQ);
    const answerFile = path.join(server.dir, `${other.requestId}.answer.json`);
    await writeFile(answerFile, JSON.stringify({ approved: 'yes' }));
    expect(await server.wait(other.requestId)).toBe('refused');
    expect(debugLog.recent().at(-1)).toMatchObject({ where: 'mcp.applyAnswer', message: expect.stringContaining(`${answerFile} is damaged: field approved`) });
  });
});
