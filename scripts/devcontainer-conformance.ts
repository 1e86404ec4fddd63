/**
 * `npm run conformance:devcontainer -- <corpus>` (docs/architecture.md §16, "Conformance"): for each
 * devcontainer configuration of each project folder in a corpus, runs `airlock env plan --json` and
 * the reference `devcontainer read-configuration` (@devcontainers/cli) and prints whether Airlock read
 * it identically, refused parts of it for a named hardening reason, or has a defect; then the counts.
 * Exits 1 below the goal (95% identical or refused). Nothing of the corpus is built or run.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { compareReading, type PlanDevcontainer, type ReferenceOutput, type Verdict } from './conformance/compare-devcontainer';

const GOAL = 0.95;
const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function run(cmd: string, args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { env, maxBuffer: 16 * 1024 * 1024, timeout: 120_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

async function isFile(p: string): Promise<boolean> {
  return stat(p).then(
    (s) => s.isFile(),
    () => false,
  );
}

/** The spec's places: `.devcontainer/devcontainer.json`, `.devcontainer.json`, `.devcontainer/<name>/devcontainer.json`. */
async function configsOf(dir: string): Promise<string[]> {
  const out: string[] = [];
  if (await isFile(path.join(dir, '.devcontainer/devcontainer.json'))) out.push('.devcontainer/devcontainer.json');
  if (await isFile(path.join(dir, '.devcontainer.json'))) out.push('.devcontainer.json');
  const subs = await readdir(path.join(dir, '.devcontainer'), { withFileTypes: true }).catch(() => []);
  for (const s of subs.filter((e) => e.isDirectory()).map((e) => e.name).sort()) if (await isFile(path.join(dir, '.devcontainer', s, 'devcontainer.json'))) out.push(`.devcontainer/${s}/devcontainer.json`);
  return out;
}

function referenceCli(): string {
  if (process.env.DEVCONTAINER_CLI) return process.env.DEVCONTAINER_CLI;
  const req = createRequire(import.meta.url);
  return path.join(path.dirname(req.resolve('@devcontainers/cli/package.json')), 'devcontainer.js');
}

async function main(argv: string[]): Promise<number> {
  const corpus = argv[0];
  if (!corpus) {
    process.stdout.write('conformance:devcontainer skipped: no corpus given (npm run conformance:devcontainer -- <corpus folder>)\n');
    return 0;
  }
  const root = path.resolve(corpus);
  const cases: string[] = [];
  for (const name of (await readdir(root)).sort()) if (!name.startsWith('_') && !name.startsWith('.') && (await stat(path.join(root, name))).isDirectory()) cases.push(name);
  const cli = referenceCli();
  const home = await mkdtemp(path.join(os.tmpdir(), 'airlock-conformance-'));
  // Neither side gets the host's environment: `${localEnv:…}` reads the same (empty) on both.
  // The reference looks for a container it made before (none): it needs the engine's default address; Airlock's plan needs no engine.
  const refEnv = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home };
  const env = { ...refEnv, AIRLOCK_HOME: home, DOCKER_HOST: 'unix:///nonexistent/airlock-conformance.sock' };
  const counts = { identical: 0, refused: 0, defect: 0 };
  let publishedFeatures = 0;
  try {
    for (const name of cases) {
      const dir = path.join(root, name);
      for (const config of await configsOf(dir)) {
        const label = `${name}/${config}`;
        const verdict = await judge(cli, dir, config, refEnv, env);
        counts[verdict.kind] += 1;
        if (verdict.notes.some((n) => n.startsWith('feature '))) publishedFeatures += 1;
        const head = verdict.kind === 'identical' ? 'read identically' : verdict.kind === 'refused' ? 'refused for a named hardening reason' : 'DEFECT';
        process.stdout.write(`${head.padEnd(36)} ${label}\n`);
        for (const d of verdict.defects) process.stdout.write(`    defect: ${d}\n`);
        for (const r of verdict.refused) process.stdout.write(`    refused: ${r}\n`);
        for (const n of verdict.notes) process.stdout.write(`    note: ${n}\n`);
      }
    }
  } finally {
    await rm(home, { recursive: true, force: true });
  }
  const total = counts.identical + counts.refused + counts.defect;
  if (!total) {
    process.stderr.write(`conformance:devcontainer: no devcontainer configuration in ${root}: give a folder of project folders, each with .devcontainer/devcontainer.json, .devcontainer.json or .devcontainer/<name>/devcontainer.json\n`);
    return 1;
  }
  const share = total ? (counts.identical + counts.refused) / total : 1;
  process.stdout.write(`\n${total} configurations: ${counts.identical} read identically, ${counts.refused} refused for a named hardening reason, ${counts.defect} defects (${(share * 100).toFixed(1)}%, goal ${GOAL * 100}%)${publishedFeatures ? `; ${publishedFeatures} ask for published features the plan could not fetch from their registry here (they are read and compared all the same; installed where the registry is reachable)` : ''}\n`);
  return share >= GOAL ? 0 : 1;
}

/** Airlock's project is the folder given, never the git repository around it: the reference is asked to mount it the same way. */
async function judge(cli: string, dir: string, config: string, refEnv: NodeJS.ProcessEnv, env: NodeJS.ProcessEnv): Promise<Verdict> {
  const [ref, ours] = await Promise.all([
    run(process.execPath, [cli, 'read-configuration', '--workspace-folder', dir, '--config', path.join(dir, config), '--mount-workspace-git-root', 'false'], refEnv),
    run(process.execPath, [path.join(repo, 'bin/airlock.js'), 'env', 'plan', dir, '--environment', `devcontainer:${config}`, '--json'], env),
  ]);
  if (ref.code !== 0) return { kind: 'defect', refused: [], defects: [`the reference could not read it: ${lastLine(ref.stderr || ref.stdout)}`], notes: [] };
  if (ours.code !== 0) return { kind: 'defect', refused: [], defects: [`airlock env plan refused it: ${lastLine(ours.stderr || ours.stdout)}`], notes: [] };
  const reference = JSON.parse(ref.stdout) as ReferenceOutput;
  const plan = (JSON.parse(ours.stdout) as { devcontainer?: PlanDevcontainer }).devcontainer;
  if (!plan) return { kind: 'defect', refused: [], defects: ['the plan shows no devcontainer'], notes: [] };
  const texts = new Map<string, string>();
  for (const f of plan.build.kind === 'compose' ? plan.build.files : []) texts.set(f, await readFile(path.join(dir, f), 'utf8').catch(() => ''));
  const cfg = reference.configuration;
  for (const f of Array.isArray(cfg.dockerComposeFile) ? cfg.dockerComposeFile : typeof cfg.dockerComposeFile === 'string' ? [cfg.dockerComposeFile] : []) {
    const abs = path.resolve(path.dirname(path.join(dir, config)), String(f));
    texts.set(path.relative(dir, abs).split(path.sep).join('/'), await readFile(abs, 'utf8').catch(() => ''));
  }
  return compareReading({ root: dir, config, reference, plan, composeText: (rel) => texts.get(rel) });
}

function lastLine(s: string): string {
  const lines = s.trim().split('\n').filter(Boolean);
  return (lines[lines.length - 1] ?? '').slice(0, 400);
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`conformance:devcontainer failed: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(2);
  },
);
