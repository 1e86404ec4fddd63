import { readFile } from 'node:fs/promises';
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
    expect(await f.terminalLog(run.id)).toContain(opts.marker);
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
});
