import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { createAirlockCore } from '../../core/app';
import { ProviderCatalog } from '../../core/keys/provider-catalog';
import { startFakeUpstream, type FakeUpstream } from '../fixtures/fake-upstream';
import { requirePrerequisite } from '../support/prerequisites';
import { CANARY_KEY, exec, leftoversOf, treeDigest } from '../support/run-fixture';

const docker = await requirePrerequisite('docker');
const cli = fileURLToPath(new URL('../../bin/airlock.js', import.meta.url));

describe.skipIf(!docker.ok)('a host process killed mid-run (real Docker)', () => {
  const cleanup: Array<() => Promise<unknown>> = [];
  afterAll(async () => {
    for (const c of cleanup.reverse()) await c().catch(() => undefined);
  });

  it('leaves no sandbox and an interrupted run after the next start; the project is untouched', async () => {
    const home = await mkdtemp(path.join(os.tmpdir(), 'airlock-crash-home-'));
    const projectDir = await mkdtemp(path.join(os.tmpdir(), 'airlock-crash-project-'));
    cleanup.push(() => rm(home, { recursive: true, force: true }), () => rm(projectDir, { recursive: true, force: true }));
    await exec('bash', ['-c', 'echo hello > a.txt && git init -q && git add -A && git -c user.email=t@t.invalid -c user.name=t commit -qm init'], { cwd: projectDir });
    const before = await treeDigest(projectDir);

    const upstream: FakeUpstream = await startFakeUpstream({
      expectedKey: CANARY_KEY,
      script: [
        { toolCalls: [{ name: 'write_file', input: { path: 'a.txt', content: 'changed inside\n' } }] },
        { toolCalls: [{ name: 'run_command', input: { command: 'echo about-to-sleep; sleep 600' } }] },
      ],
    });
    cleanup.push(() => upstream.close());
    await new ProviderCatalog({ home }).setBaseUrl('anthropic', upstream.url);

    const env = { ...process.env, AIRLOCK_HOME: home, AIRLOCK_TEST_KEY: CANARY_KEY };
    const child = spawn(process.execPath, [cli, 'run', projectDir, '--task', 'sleep a while', '--provider', 'anthropic', '--key-env', 'AIRLOCK_TEST_KEY', '--json'], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    cleanup.push(async () => child.kill('SIGKILL'));
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));

    // Wait until the agent is inside its long command, then kill the host process outright.
    const runId = await new Promise<string>((resolve, reject) => {
      let id = '';
      const rl = createInterface({ input: child.stdout });
      rl.on('line', (line) => {
        const e = JSON.parse(line) as { type?: string; runId?: string; event?: { type: string; data?: string } };
        if (e.type === 'run_started' && e.runId) id = e.runId;
        if (e.event?.type === 'command_output' && e.event.data?.includes('about-to-sleep')) resolve(id);
      });
      child.on('exit', (code) => reject(new Error(`airlock run exited (${code}) before the command started: ${stderr}`)));
    });
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    expect((await leftoversOf(runId)).length).toBeGreaterThan(0); // the crash left the sandbox behind…

    // Reading history tells the truth at once, before any `run`/`serve` recovers the run.
    const readEnv = { ...process.env, AIRLOCK_HOME: home };
    const listed = JSON.parse((await exec('node', [cli, 'runs', '--json'], { env: readEnv })).stdout) as Array<{ id: string; status: string }>;
    expect(listed.find((r) => r.id === runId)?.status).toBe('interrupted');
    const shown = JSON.parse((await exec('node', [cli, 'show', runId, '--json'], { env: readEnv })).stdout) as { status: string; error?: { message: string } };
    expect(shown.status).toBe('interrupted');
    expect(shown.error?.message).toContain('stopped before it finished');
    // Reading is only a view: the record, the log and the leftover sandbox wait for recovery.
    expect(JSON.parse(await readFile(path.join(home, 'runs', runId, 'run.json'), 'utf8')).status).not.toBe('interrupted');
    expect((await leftoversOf(runId)).length).toBeGreaterThan(0);

    const core = await createAirlockCore({ env: { ...process.env, AIRLOCK_HOME: home } });
    try {
      const run = await core.store.get(runId);
      expect(run.status).toBe('interrupted');
      expect(await leftoversOf(runId)).toEqual([]); // …and the next start reaped it
      expect(await treeDigest(projectDir)).toBe(before);
      const events = await exec('node', [cli, 'audit', 'verify', runId], { env: { ...process.env, AIRLOCK_HOME: home } });
      expect(events.stdout).toContain('intact');
    } finally {
      await core.dispose();
    }
  });
});
