/**
 * docs/architecture.md §16, "The setup phase": setup you can watch and stop. On a real engine, a
 * `postCreateCommand` that hangs streams its output as `setup` events, says it is still running when
 * silent (the interval is the test's), and a cancel through the service or Ctrl+C to the CLI ends the
 * run at once (not when the command would end), with nothing of the run left on the engine. `auto`
 * with a devcontainer the user never accepted runs on Airlock's image and the CLI says why.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { RunEvent } from '../../contracts';
import { StartRunInput } from '../../contracts/runs';
import { ProviderCatalog } from '../../core/keys/provider-catalog';
import { requirePrerequisite } from '../support/prerequisites';
import { CANARY_KEY, createRunFixture, exec, leftoversOf, type RunFixture } from '../support/run-fixture';

const docker = await requirePrerequisite('docker');
const cli = fileURLToPath(new URL('../../bin/airlock.js', import.meta.url));
/** What the hanging command would take: a stop that waited for it would take this long. */
const HANG_S = 600;

/** Containers, volumes and networks the engine still has for a run, by its label. */
async function everythingOf(runId: string): Promise<string[]> {
  const networks = (await exec('docker', ['network', 'ls', '-q', '--filter', `label=airlock.run=${runId}`])).stdout.trim();
  return [...(await leftoversOf(runId)), ...networks.split('\n').filter(Boolean)];
}

describe.skipIf(!docker.ok)('setup you can watch and stop (real Docker, fake upstream)', () => {
  let f: RunFixture;
  let airlockImage: string;
  const homes: string[] = [];

  beforeAll(async () => {
    // A second's silence is "still running" here (a minute by default).
    f = await createRunFixture({ setupQuietMs: 1000 });
    airlockImage = await f.core.image('base');
  });
  afterAll(async () => {
    await f?.close();
    for (const h of homes) await rm(h, { recursive: true, force: true });
  });

  const hanging = () => f.project({ 'README.md': '# hangs\n', '.devcontainer/devcontainer.json': JSON.stringify({ image: airlockImage, postCreateCommand: `echo setup-begins; sleep ${HANG_S}` }) });

  it('a hanging postCreateCommand streams, says it is still running, and a cancel ends the run at once with nothing left', async () => {
    const projectDir = await hanging();
    const calls = f.upstream.requests.length;
    f.upstream.setScript([{ toolCalls: [{ name: 'finish', input: { summary: 'never' } }] }]);
    const events: RunEvent[] = [];
    const sub = f.services.runs.onDidEvent((e) => events.push(e));
    const started = await f.services.runs.start(StartRunInput.parse({ projectDir, task: 't', provider: 'anthropic', model: 'claude-sonnet-4-5', trustEnvironment: true }));
    const setup = () => events.filter((e) => e.runId === started.id).flatMap((e) => (e.event.type === 'setup' ? [e.event] : []));
    await vi.waitFor(() => expect(setup().some((e) => e.phase === 'still_running')).toBe(true), { timeout: 300_000, interval: 100 });
    const seen = setup();
    expect(seen[0]).toMatchObject({ phase: 'started', step: 'postCreateCommand', command: `echo setup-begins; sleep ${HANG_S}`, elapsedMs: 0 });
    expect(seen.some((e) => e.phase === 'output' && e.data?.includes('setup-begins'))).toBe(true);
    expect(seen.find((e) => e.phase === 'still_running')?.elapsedMs).toBeGreaterThanOrEqual(1000);

    const t0 = Date.now();
    await f.services.runs.cancel({ runId: started.id });
    const run = await f.core.runs.wait(started.id);
    const tookS = (Date.now() - t0) / 1000;
    sub.dispose();
    expect(run.status).toBe('cancelled');
    // Not waiting for the command: the old path waited the whole sleep (or setup's 30-minute limit).
    expect(tookS).toBeLessThan(HANG_S / 10);
    expect(setup().at(-1)).toMatchObject({ phase: 'stopped', step: 'postCreateCommand' });
    expect(run.wipe?.verified).toBe(true);
    expect(await everythingOf(run.id)).toEqual([]);
    expect(f.upstream.requests.length).toBe(calls);
    expect(await f.terminalLog(run.id)).toMatch(/\[setup\] postCreateCommand: still running \(/);
  });

  it('Ctrl+C to `airlock run --json` during a hanging setup command ends it at once, nothing left; setup streams as events', async () => {
    const projectDir = await hanging();
    const home = await mkdtemp(path.join(os.tmpdir(), 'airlock-setup-stop-'));
    homes.push(home);
    await new ProviderCatalog({ home }).setBaseUrl('anthropic', f.upstream.url);
    const child = spawn(process.execPath, [cli, 'run', projectDir, '--task', 't', '--provider', 'anthropic', '--key-env', 'AIRLOCK_TEST_KEY', '--trust-environment', '--json'], {
      env: { ...process.env, AIRLOCK_HOME: home, AIRLOCK_TEST_KEY: CANARY_KEY },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const lines: Array<Record<string, unknown> & { event?: { type: string; phase?: string; data?: string } }> = [];
    let runId = '';
    await new Promise<void>((resolve, reject) => {
      createInterface({ input: child.stdout }).on('line', (line) => {
        const e = JSON.parse(line) as (typeof lines)[number];
        lines.push(e);
        if (e.type === 'run_started') runId = String(e.runId);
        if (e.event?.type === 'setup' && e.event.phase === 'output' && e.event.data?.includes('setup-begins')) resolve();
      });
      void exited.then((code) => reject(new Error(`airlock run exited (${code}) before setup started: ${stderr}`)));
    });
    const t0 = Date.now();
    child.kill('SIGINT');
    const code = await exited;
    const tookS = (Date.now() - t0) / 1000;
    expect(code).toBe(4);
    expect(tookS).toBeLessThan(HANG_S / 10);
    expect(stderr).toContain('cancelling');
    const summary = lines.at(-1) as { type: string; status: string; wipe: { verified: boolean } };
    expect(summary).toMatchObject({ type: 'summary', status: 'cancelled', wipe: { verified: true } });
    // The environment and each setup phase reach `--json` as events.
    expect(lines.some((l) => l.event?.type === 'environment')).toBe(true);
    expect(lines.filter((l) => l.event?.type === 'setup').map((l) => l.event?.phase)).toEqual(expect.arrayContaining(['started', 'output', 'stopped']));
    expect(await everythingOf(runId)).toEqual([]);
  });

  it("`auto` with a devcontainer nobody accepted (a published feature) runs on Airlock's image and says why in one line", async () => {
    const projectDir = await f.project({ 'a.txt': 'one\n', '.devcontainer/devcontainer.json': JSON.stringify({ image: 'debian:bookworm-slim', features: { 'localhost:1/airlock-test/go:1': {} } }) });
    const home = await mkdtemp(path.join(os.tmpdir(), 'airlock-auto-'));
    homes.push(home);
    await new ProviderCatalog({ home }).setBaseUrl('anthropic', f.upstream.url);
    f.upstream.setScript([{ toolCalls: [{ name: 'finish', input: { summary: 'nothing to do' } }] }]);
    const out = await exec(process.execPath, [cli, 'run', projectDir, '--task', 't', '--provider', 'anthropic', '--key-env', 'AIRLOCK_TEST_KEY'], { env: { ...process.env, AIRLOCK_HOME: home, AIRLOCK_TEST_KEY: CANARY_KEY } });
    const line = out.stdout.split('\n').find((l) => l.startsWith('environment: '));
    expect(line).toMatch(/^environment: Airlock's own image — \.devcontainer\/devcontainer\.json not used, Airlock's own image ran instead: .*feature 'localhost:1\/airlock-test\/go:1': the registry localhost:1 is unreachable/);
    expect(out.stdout).toMatch(/\nDONE /);
    // The report names the fallback too.
    expect(out.stdout).toMatch(/\nenvironment: Airlock's own image \(\.devcontainer\/devcontainer\.json not used/);
  });
});
