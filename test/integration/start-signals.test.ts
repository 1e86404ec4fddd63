import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { requirePrerequisite } from '../support/prerequisites';
import { exec } from '../support/run-fixture';

const docker = await requirePrerequisite('docker');
const root = fileURLToPath(new URL('../..', import.meta.url));

interface Started {
  child: ChildProcess;
  out: () => string;
  err: () => string;
  /** npm re-raises the interrupt on itself once its script is done, so this is npm's signal or code. */
  exited: Promise<number | string | null>;
  servePid: number;
}

/** `npm start` in a process group of its own, as a terminal runs a foreground job. */
async function startApp(home: string): Promise<Started> {
  const child = spawn('npm', ['start', '--', '--no-open'], {
    cwd: root,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, AIRLOCK_HOME: home, AIRLOCK_KEYCHAIN_SERVICE: `airlock-start-signals-${process.pid}`, npm_config_update_notifier: 'false' },
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | string | null>((resolve) => child.on('exit', (code, signal) => resolve(code ?? signal)));
  await vi.waitFor(() => expect(out).toMatch(/Airlock is running at http:\/\/127\.0\.0\.1:\d+/), { timeout: 300_000, interval: 200 });
  return { child, out: () => out, err: () => err, exited, servePid: await servePidUnder(child.pid!) };
}

/** The `airlock serve` process started (directly or through npm and scripts/start.mjs) under `pid`. */
async function servePidUnder(pid: number): Promise<number> {
  const { stdout } = await exec('ps', ['-eo', 'pid=,ppid=,args=']);
  const procs = stdout.split('\n').map((l) => l.trim().match(/^(\d+)\s+(\d+)\s+(.*)$/)).filter((m): m is RegExpMatchArray => m !== null);
  const tree = new Set([pid]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const [, p, pp] of procs) if (tree.has(Number(pp)) && !tree.has(Number(p))) (tree.add(Number(p)), (grew = true));
  }
  const serve = procs.find(([, p, , args]) => tree.has(Number(p)) && /airlock\.js serve/.test(args!));
  if (!serve) throw new Error(`no 'airlock serve' under pid ${pid}`);
  return Number(serve[1]);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Containers (any state) created by that process: the owner label is `<hostname>:<pid>`. */
async function containersOf(pid: number, extra: string[] = []): Promise<string[]> {
  const { stdout } = await exec('docker', ['ps', '-aq', '--filter', `label=airlock.owner=${os.hostname()}:${pid}`, ...extra.flatMap((f) => ['--filter', f])]);
  return stdout.split('\n').filter(Boolean);
}

describe.skipIf(!docker.ok)('Ctrl+C on `npm start` (real Docker, the browser fallback of `airlock serve`)', () => {
  const cleanup: Array<() => Promise<unknown>> = [];
  afterAll(async () => {
    for (const c of cleanup.reverse()) await c().catch(() => undefined);
  });

  async function started(): Promise<Started & { poolRun: string }> {
    const home = await mkdtemp(path.join(os.tmpdir(), 'airlock-start-signals-'));
    cleanup.push(() => rm(home, { recursive: true, force: true }));
    const app = await startApp(home);
    cleanup.push(async () => {
      if (app.child.exitCode === null) process.kill(-app.child.pid!, 'SIGKILL');
      // Only what this test's own process created, should an assertion have failed first.
      const left = await containersOf(app.servePid);
      if (left.length) await exec('docker', ['rm', '-f', ...left]);
    });
    // The warm pool has started its container: the thing a dirty exit used to leave behind.
    let pooled: string[] = [];
    await vi.waitFor(async () => {
      pooled = await containersOf(app.servePid, ['label=airlock.pool=true', 'status=running']);
      expect(pooled.length).toBeGreaterThan(0);
    }, { timeout: 120_000, interval: 500 });
    const { stdout } = await exec('docker', ['inspect', '-f', '{{index .Config.Labels "airlock.run"}}', pooled[0]!]);
    return { ...app, poolRun: stdout.trim() };
  }

  async function expectNothingLeft(app: Started & { poolRun: string }): Promise<void> {
    expect(await containersOf(app.servePid)).toEqual([]);
    const { stdout } = await exec('docker', ['volume', 'ls', '-q', '--filter', `label=airlock.run=${app.poolRun}`]);
    expect(stdout.trim()).toBe('');
  }

  it('one Ctrl+C to the process group stops the server after removing the warm-pool sandbox', async () => {
    const app = await started();
    process.kill(-app.child.pid!, 'SIGINT'); // what the terminal does: the whole foreground group
    expect([0, 'SIGINT']).toContain(await app.exited);
    expect(alive(app.servePid)).toBe(false);
    await expectNothingLeft(app);
    expect(app.err()).toContain('Stopping: removing sandboxes');
    // npm forwards the terminal's SIGINT a second time: that is the same keypress, not a second one.
    expect(app.err()).not.toContain('Still cleaning up');
  });
});
