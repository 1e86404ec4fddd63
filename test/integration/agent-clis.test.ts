import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunEvent } from '../../contracts/runs';
import type { ScriptedTurn } from '../fixtures/fake-upstream';
import { requirePrerequisite } from '../support/prerequisites';
import { CANARY_KEY, createRunFixture, filesContaining, leftoversOf, type RunFixture } from '../support/run-fixture';

/**
 * The unchanged third-party CLIs (the `agents` image variant: @anthropic-ai/claude-code and
 * @openai/codex from npm) run inside a hardened sandbox with no network, reach the scripted fake
 * upstream only through the model proxy with the run token, and complete a task whose diff, events,
 * usage and audit log come out right. The key appears nowhere Airlock wrote.
 */

const docker = await requirePrerequisite('docker');

async function eventsOf(f: RunFixture, runId: string): Promise<RunEvent['event'][]> {
  const out: RunEvent['event'][] = [];
  for await (const e of f.core.store.readEvents<RunEvent>(runId)) out.push(e.event);
  return out;
}

describe.skipIf(!docker.ok)('third-party agent CLIs in the sandbox (real Docker, proxy, fake upstream)', () => {
  let f: RunFixture;
  beforeAll(async () => {
    f = await createRunFixture();
    // The agents image is large (both CLIs from npm); build it here, under the hook timeout.
    await f.core.image('agents');
  });
  afterAll(async () => {
    await f?.close();
  });

  async function runAndCheck(opts: { agent: 'claude-code' | 'codex'; provider: 'anthropic' | 'openai'; model: string; script: ScriptedTurn[]; marker: string }) {
    const projectDir = await f.project();
    const started = await f.start({ projectDir, agent: opts.agent, provider: opts.provider, model: opts.model, task: 'Create out.txt with a greeting.', script: opts.script });
    const run = await f.core.runs.wait(started.id);
    const events = await eventsOf(f, run.id);
    const diagnostics = () => JSON.stringify({ status: run.status, error: run.error, events: events.slice(-15) }).slice(0, 4000);
    expect(run.status, diagnostics()).toBe('done');

    // The CLI's own command ran in the sandbox; its events were mapped.
    const started_ = events.filter((e) => e.type === 'command_started');
    expect(started_.length, diagnostics()).toBeGreaterThanOrEqual(1);
    const terminal = await f.terminalLog(run.id);
    expect(terminal).toContain(opts.marker);
    // The CLI's structured stream went to the transcript; the terminal shows what its commands printed.
    expect(terminal).not.toMatch(/\{"type":/);
    expect(events.find((e) => e.type === 'finished')).toMatchObject({ summary: 'All done here.' });

    // The result is the diff.
    expect(run.changedFiles.map((c) => `${c.status} ${c.path}`)).toContain('added out.txt');
    expect(await readFile(f.core.store.paths(run.id).patch, 'utf8')).toContain(`+${opts.marker}`);

    // Every model call went through the proxy: metered, and the upstream saw the real key.
    expect(run.usage.requests).toBeGreaterThanOrEqual(2);
    const generation = f.upstream.requests.filter((r) => r.method === 'POST' && (r.path === '/v1/messages' || r.path === '/v1/responses'));
    expect(generation.length).toBeGreaterThanOrEqual(2);
    for (const r of generation) expect([r.headers['x-api-key'], r.headers.authorization]).toContain(r.headers['x-api-key'] ? CANARY_KEY : `Bearer ${CANARY_KEY}`);

    // Audit intact, sandbox verified gone, key nowhere in what Airlock kept.
    expect((await f.services.audit.verify({ runId: run.id })).intact).toBe(true);
    expect(run.wipe?.leftovers).toEqual([]);
    expect(await leftoversOf(run.id)).toEqual([]);
    expect(await filesContaining(f.core.store.paths(run.id).dir, CANARY_KEY)).toEqual([]);
    return { run, events };
  }

  it('Claude Code completes a scripted task through the proxy', async () => {
    const marker = 'hello-from-claude';
    const { events } = await runAndCheck({
      agent: 'claude-code',
      provider: 'anthropic',
      model: 'claude-sonnet-4-5',
      marker,
      script: [
        { toolCalls: [{ name: 'Bash', input: { command: `echo ${marker} > out.txt && cat out.txt`, description: 'write the file' } }] },
        { text: 'All done here.' },
      ],
    });
    expect(events.find((e) => e.type === 'tool_call')).toMatchObject({ name: 'Bash' });
    // Claude Code's requests keep their query string through the proxy.
    expect(f.upstream.requests.some((r) => r.url === '/v1/messages?beta=true')).toBe(true);
  });

  it('Codex CLI completes a scripted task through the proxy (Responses API)', async () => {
    const marker = 'hello-from-codex';
    const { events } = await runAndCheck({
      agent: 'codex',
      provider: 'openai',
      model: 'gpt-5',
      marker,
      script: [
        { toolCalls: [{ name: 'exec_command', input: { cmd: `echo ${marker} > out.txt && cat out.txt` } }] },
        { text: 'All done here.' },
      ],
    });
    expect(events.find((e) => e.type === 'command_exited')).toMatchObject({ exitCode: 0 });
  });

  /**
   * A follow-up turn (docs/architecture.md §15): the CLI's own session file is carried out of the
   * first sandbox and into the second, and the CLI resumes it with its own option; the model's
   * first request of turn 2 carries turn 1, and turn 1's file is there to read.
   */
  async function continueAndCheck(opts: { agent: 'claude-code' | 'codex'; provider: 'anthropic' | 'openai'; model: string; first: ScriptedTurn[]; second: ScriptedTurn[]; marker: string }) {
    const generation = () => f.upstream.requests.filter((r) => r.method === 'POST' && (r.path === '/v1/messages' || r.path === '/v1/responses'));
    const { run: first } = await runAndCheck({ agent: opts.agent, provider: opts.provider, model: opts.model, script: opts.first, marker: opts.marker });
    const session = JSON.parse(await readFile(path.join(f.core.store.paths(first.id).artifacts, 'session.json'), 'utf8')) as { files: Array<{ path: string; data: string }> };
    expect(session.files.length).toBeGreaterThanOrEqual(1);
    for (const file of session.files) expect(Buffer.from(file.data, 'base64').toString('utf8')).not.toContain(CANARY_KEY);
    const before = generation().length;
    f.upstream.setScript(opts.second);
    const second = await f.core.runs.wait((await f.services.runs.continue({ runId: first.id, task: 'Now copy out.txt to back.txt.' })).id);
    const events = await eventsOf(f, second.id);
    expect(second.status, JSON.stringify({ error: second.error, events: events.slice(-10) }).slice(0, 3000)).toBe('done');
    expect(second.thread).toEqual({ rootRunId: first.id, parentRunId: first.id, turn: 2, conversation: 'carried' });
    expect(Date.parse(first.wipe?.at as string)).toBeLessThan(Date.parse(second.createdAt));
    // The first request of turn 2, as the upstream received it, holds turn 1's task and work, then the new task.
    const sent = JSON.stringify(generation()[before]?.body ?? null);
    expect(sent).toContain('Create out.txt with a greeting.');
    expect(sent).toContain(opts.marker);
    expect(sent).toContain('Now copy out.txt to back.txt.');
    // The sandbox started from turn 1's result: back.txt is a copy of out.txt.
    expect(second.changedFiles.map((c) => `${c.status} ${c.path}`)).toEqual(['added back.txt']);
    expect(await readFile(f.core.store.paths(second.id).patch, 'utf8')).toContain(`+${opts.marker}`);
    expect((await f.services.diffs.list({ runId: second.id, scope: 'thread' })).files.map((c) => c.path).sort()).toEqual(['back.txt', 'out.txt']);
    expect(await filesContaining(f.core.store.paths(second.id).dir, CANARY_KEY)).toEqual([]);
  }

  it('Claude Code continues its own session in a follow-up turn (--session-id, then --resume)', async () => {
    const marker = 'hello-again-claude';
    await continueAndCheck({
      agent: 'claude-code',
      provider: 'anthropic',
      model: 'claude-sonnet-4-5',
      marker,
      first: [{ toolCalls: [{ name: 'Bash', input: { command: `echo ${marker} > out.txt && cat out.txt`, description: 'write the file' } }] }, { text: 'All done here.' }],
      second: [{ toolCalls: [{ name: 'Bash', input: { command: 'cp out.txt back.txt', description: 'copy the file' } }] }, { text: 'Copied.' }],
    });
  });

  it('Codex CLI continues its own session in a follow-up turn (exec resume --last)', async () => {
    const marker = 'hello-again-codex';
    await continueAndCheck({
      agent: 'codex',
      provider: 'openai',
      model: 'gpt-5',
      marker,
      first: [{ toolCalls: [{ name: 'exec_command', input: { cmd: `echo ${marker} > out.txt && cat out.txt` } }] }, { text: 'All done here.' }],
      second: [{ toolCalls: [{ name: 'exec_command', input: { cmd: 'cp out.txt back.txt' } }] }, { text: 'Copied.' }],
    });
  });
});

