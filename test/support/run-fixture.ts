import { execFile } from 'node:child_process';
import { mkdtemp, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { StartRunInput } from '../../contracts/runs';
import { StartRunInput as StartRunSchema } from '../../contracts/runs';
import { createAirlockCore, type AirlockCore } from '../../core/app';
import { airlockHome } from '../../core/common/paths';
import { servicesFor } from '../../core/app-services';
import type { AirlockServices } from '../../core/api/services';
import type { StoredRun } from '../../core/runs/run-view';
import { startFakeUpstream, type FakeUpstream, type ScriptedTurn } from '../fixtures/fake-upstream';

export const exec = promisify(execFile);

/** A distinctive provider key: the canary that must be found nowhere but in the upstream's view. */
export const CANARY_KEY = `sk-ant-canary-${'7e3f9a1c'.repeat(4)}-AIRLOCK`;

export interface RunFixture {
  home: string;
  upstream: FakeUpstream;
  core: AirlockCore;
  services: AirlockServices;
  /** Creates a small git project in a temp dir. */
  project(files?: Record<string, string>): Promise<string>;
  start(input: Partial<StartRunInput> & { projectDir: string; script: ScriptedTurn[] }): Promise<StoredRun>;
  /** The run's terminal log: its commands' output (kept there, not in the event log). */
  terminalLog(runId: string): Promise<string>;
  close(): Promise<void>;
}

/**
 * A real core (real Docker, real proxy, keys in memory or the real keychain under a test service
 * name) pointed at the scripted fake upstream for both wire formats.
 */
export async function createRunFixture(opts: { storage?: 'keychain' | 'session' } = {}): Promise<RunFixture> {
  const home = await mkdtemp(path.join(os.tmpdir(), 'airlock-home-'));
  const upstream = await startFakeUpstream({ expectedKey: CANARY_KEY });
  const env = {
    ...process.env,
    AIRLOCK_HOME: home,
    AIRLOCK_KEYCHAIN_SERVICE: `airlock-test-${process.pid}`,
    // VM kernel, initramfs and base disks are prepared once per machine, not per test home.
    AIRLOCK_VM_ASSETS: process.env.AIRLOCK_VM_ASSETS ?? path.join(airlockHome(process.env), 'vm'),
  };
  const core = await createAirlockCore({ env });
  await core.catalog.setBaseUrl('anthropic', upstream.url);
  await core.catalog.setBaseUrl('openai', `${upstream.url}/v1`);
  await core.vault.set('anthropic', CANARY_KEY, { storage: opts.storage ?? 'session' });
  await core.vault.set('openai', CANARY_KEY, { storage: opts.storage ?? 'session' });
  const services = servicesFor(core);
  const projects: string[] = [];
  return {
    home,
    upstream,
    core,
    services,
    async project(files = { 'README.md': '# demo\n', 'src/app.js': 'export function answer() {\n  return 1;\n}\n', 'notes.txt': 'one\ntwo\n' }) {
      const dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-project-'));
      projects.push(dir);
      for (const [name, content] of Object.entries(files)) {
        await mkdir(path.dirname(path.join(dir, name)), { recursive: true });
        await writeFile(path.join(dir, name), content);
      }
      await exec('git', ['init', '-q', '-b', 'main'], { cwd: dir });
      await exec('git', ['add', '-A'], { cwd: dir });
      await exec('git', ['-c', 'user.email=t@example.invalid', '-c', 'user.name=t', 'commit', '-qm', 'init'], { cwd: dir });
      return dir;
    },
    async start({ script, ...input }) {
      upstream.setScript(script);
      const args = StartRunSchema.parse({ task: 'do the thing', provider: 'anthropic', model: 'claude-sonnet-4-5', ...input });
      return core.runs.start(args);
    },
    terminalLog(runId) {
      return readFile(path.join(core.store.paths(runId).dir, 'terminal.log'), 'utf8');
    },
    async close() {
      await services.dispose();
      if ((opts.storage ?? 'session') === 'keychain') {
        await core.vault.remove('anthropic').catch(() => undefined);
        await core.vault.remove('openai').catch(() => undefined);
      }
      await upstream.close();
      for (const p of projects) await rm(p, { recursive: true, force: true });
      await rm(home, { recursive: true, force: true });
    },
  };
}

/** Every file under `dir` (recursive) that contains `needle`; fails loudly if nothing could be read. */
export async function filesContaining(dir: string, needle: string): Promise<string[]> {
  const hits: string[] = [];
  let read = 0;
  async function walk(d: string): Promise<void> {
    for (const e of await readdir(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) await walk(p);
      else if (e.isFile()) {
        read++;
        if ((await readFile(p)).includes(needle)) hits.push(p);
      }
    }
  }
  await walk(dir);
  if (read === 0) throw new Error(`the search for the canary read no files under ${dir}`);
  return hits;
}

/** Containers and volumes the engine still has for a run (by label). */
export async function leftoversOf(runId: string): Promise<string[]> {
  const containers = (await exec('docker', ['ps', '-aq', '--filter', `label=airlock.run=${runId}`])).stdout.trim();
  const volumes = (await exec('docker', ['volume', 'ls', '-q', '--filter', `label=airlock.run=${runId}`])).stdout.trim();
  return [...containers.split('\n'), ...volumes.split('\n')].filter(Boolean);
}

/** A stable digest of a project folder's contents (including .git), to prove it was not written. */
export async function treeDigest(dir: string): Promise<string> {
  const { stdout } = await exec('bash', ['-c', 'find . -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum'], { cwd: dir });
  return stdout.trim();
}
