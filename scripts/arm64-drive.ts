/**
 * The arm64 check's driver (scripts/arm64-check.sh runs it with tsx; docs/architecture.md §4 "Image
 * architecture"). On an engine that emulates arm64 (binfmt + qemu-user-static) and holds an arm64
 * Debian under AIRLOCK_SANDBOX_BASE_IMAGE, it builds the sandbox image for arm64 through the app's
 * own build path (ensureSandboxImage with AIRLOCK_SANDBOX_ARCH=arm64), then drives the real CLI
 * against the scripted fake provider: the built-in agent on Airlock's image, the built-in agent on a
 * devcontainer whose Dockerfile is FROM that arm64 base, and Claude Code and Codex on the agents
 * image. Each run must change a file, be reviewed (`patch`), applied (`apply`) and its sandbox
 * verified gone. Prints one `RESULT` line per step and a summary; exits non-zero on the first failure.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ProviderCatalog } from '../core/keys/provider-catalog';
import { connectEngine, type Engine } from '../core/sandbox/docker/engine';
import { ensureSandboxImage } from '../core/sandbox/image';
import { LABEL_KIND } from '../core/sandbox/labels';
import { startFakeUpstream, type FakeUpstream, type ScriptedTurn } from '../test/fixtures/fake-upstream';

const ARCH = process.env.AIRLOCK_SANDBOX_ARCH ?? '';
const cli = fileURLToPath(new URL('../bin/airlock.js', import.meta.url));
/** A made-up key: the fake provider checks the proxy swapped the run's token for it. */
const KEY = `sk-arm64-check-${'5d1c'.repeat(6)}`;
const results: string[] = [];

function log(line: string): void {
  process.stdout.write(`[arm64-drive ${new Date().toISOString().slice(11, 19)}] ${line}\n`);
}

function fail(step: string, why: string): never {
  log(`RESULT ${step}: FAIL ${why}`);
  for (const r of results) log(r);
  process.exit(1);
}

function secs(ms: number): string {
  return `${(ms / 1000).toFixed(0)} s`;
}

interface Cli {
  code: number;
  stdout: string;
  stderr: string;
}

function run(cmd: string, args: string[], env: NodeJS.ProcessEnv, cwd?: string): Promise<Cli> {
  return new Promise((resolve) => {
    execFile(cmd, args, { env, cwd, maxBuffer: 256 * 1024 * 1024 }, (err, stdout, stderr) => {
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

async function imageFacts(engine: Engine, ref: string): Promise<{ arch: string; size: string }> {
  const i = await engine.docker.getImage(ref).inspect();
  return { arch: i.Architecture, size: `${(i.Size / 1e6).toFixed(0)} MB` };
}

/** Runs `sh -c script` in a throwaway, network-less container of `ref` and returns its output. */
async function inImage(engine: Engine, ref: string, script: string): Promise<string> {
  const c = await engine.docker.createContainer({
    Image: ref,
    Entrypoint: ['/bin/sh', '-c'],
    Cmd: [script],
    User: '0:0',
    Labels: { [LABEL_KIND]: 'image-check', 'airlock.arm64-check': '1' },
    HostConfig: { NetworkMode: 'none', CapDrop: ['ALL'], SecurityOpt: ['no-new-privileges'] },
  });
  try {
    await c.start();
    await c.wait();
    const logs = (await c.logs({ stdout: true, stderr: true })) as unknown as Buffer;
    return demux(logs);
  } finally {
    await c.remove({ force: true }).catch(() => undefined);
  }
}

/** The engine's multiplexed log stream as text (8-byte frame headers dropped). */
function demux(buf: Buffer): string {
  let out = '';
  let i = 0;
  while (i + 8 <= buf.length) {
    const len = buf.readUInt32BE(i + 4);
    out += buf.subarray(i + 8, i + 8 + len).toString('utf8');
    i += 8 + len;
  }
  return out;
}

async function gitProject(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-arm64-project-'));
  for (const [name, content] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, name)), { recursive: true });
    await writeFile(path.join(dir, name), content);
  }
  const git = (...a: string[]) => run('git', ['-c', 'user.email=check@airlock.invalid', '-c', 'user.name=check', ...a], process.env, dir);
  await git('init', '-q', '-b', 'main');
  await git('add', '-A');
  await git('commit', '-qm', 'init');
  return dir;
}

interface RunCase {
  step: string;
  upstream: FakeUpstream;
  script: ScriptedTurn[];
  files: Record<string, string>;
  args: string[];
  /** The file the run must change and what it must then hold (after apply, on the applied branch). */
  changed: { path: string; content: string };
  /** Strings the run's events must contain (command output proving where it ran). */
  expectOutput: string[];
}

/** One run through the CLI: run → patch (review) → apply to a branch → sandbox verified gone. */
async function cliRun(env: NodeJS.ProcessEnv, c: RunCase): Promise<void> {
  const projectDir = await gitProject(c.files);
  try {
    c.upstream.setScript(c.script);
    const t0 = Date.now();
    const r = await run(process.execPath, [cli, 'run', projectDir, '--task', `arm64 check: ${c.step}`, '--key-env', 'AIRLOCK_ARM64_KEY', '--timeout', '3600', '--json', ...c.args], env);
    const took = Date.now() - t0;
    if (`${r.stdout}${r.stderr}`.includes(KEY)) fail(c.step, 'the provider key appeared in the CLI output');
    const lines = r.stdout
      .trim()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { type?: string; runId?: string; status?: string; changedFiles?: Array<{ path: string }>; error?: unknown; event?: { type?: string; data?: string } });
    const summary = lines.at(-1);
    if (r.code !== 0 || summary?.type !== 'summary' || summary.status !== 'done') {
      fail(c.step, `run did not finish (exit ${r.code}, status ${summary?.status ?? '-'}): ${JSON.stringify(summary?.error ?? '').slice(0, 600)}\n${r.stderr.slice(-3000)}`);
    }
    const runId = summary.runId as string;
    const changed = (summary.changedFiles ?? []).map((f) => f.path);
    if (!changed.includes(c.changed.path)) fail(c.step, `changed files ${JSON.stringify(changed)} lack ${c.changed.path}`);
    const output = JSON.stringify(lines.filter((l) => l.type !== 'summary'));
    for (const want of c.expectOutput) if (!output.includes(want)) fail(c.step, `the run's events do not contain '${want}'`);

    // Review: the patch and its digest; apply needs that digest.
    const patchFile = path.join(projectDir, '..', `${path.basename(projectDir)}.patch`);
    const patch = await run(process.execPath, [cli, 'patch', runId, '--out', patchFile], env);
    const reviewed = /sha256 ([0-9a-f]{64})/.exec(patch.stderr)?.[1];
    if (patch.code !== 0 || !reviewed) fail(c.step, `patch failed: ${patch.stderr.slice(-800)}`);
    await rm(patchFile, { force: true });
    const branch = 'airlock/arm64-check';
    const apply = await run(process.execPath, [cli, 'apply', runId, '--branch', branch, '--reviewed', reviewed], env);
    if (apply.code !== 0) fail(c.step, `apply failed: ${apply.stderr.slice(-800)}`);
    const applied = await run('git', ['show', `${branch}:${c.changed.path}`], process.env, projectDir);
    if (applied.stdout !== c.changed.content) fail(c.step, `applied ${c.changed.path} holds ${JSON.stringify(applied.stdout.slice(0, 200))}`);
    const show = await run(process.execPath, [cli, 'show', runId], env);
    if (!show.stdout.includes('verified gone')) fail(c.step, `the sandbox is not verified gone:\n${show.stdout.slice(-1500)}`);
    const line = `RESULT ${c.step}: PASS run ${secs(took)} (changed ${changed.join(', ')}; reviewed, applied to ${branch}, sandbox verified gone)`;
    results.push(line);
    log(line);
  } finally {
    await rm(projectDir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  if (ARCH !== 'arm64') fail('setup', 'run through scripts/arm64-check.sh (AIRLOCK_SANDBOX_ARCH=arm64 and AIRLOCK_SANDBOX_BASE_IMAGE)');
  const only = new Set((process.env.AIRLOCK_ARM64_STEPS ?? 'builtin,devcontainer,agents').split(','));
  const engine = await connectEngine(process.env);
  const home = await mkdtemp(path.join(os.tmpdir(), 'airlock-arm64-home-'));
  const upstream = await startFakeUpstream({ expectedKey: KEY });
  try {
    const catalog = new ProviderCatalog({ home });
    await catalog.setBaseUrl('anthropic', upstream.url);
    // OpenAI-kind base URLs include the version segment (provider-catalog.ts), as the app's own tests set it.
    await catalog.setBaseUrl('openai', `${upstream.url}/v1`);
    const env: NodeJS.ProcessEnv = { ...process.env, AIRLOCK_HOME: home, AIRLOCK_ARM64_KEY: KEY };

    // 1. Airlock's image for arm64, through the app's own build path.
    let t0 = Date.now();
    const base = await ensureSandboxImage({ env: process.env, engine, variant: 'base', onProgress: progressLog() });
    const baseFacts = await imageFacts(engine, base.ref);
    if (baseFacts.arch !== 'arm64') fail('image', `${base.ref} is ${baseFacts.arch}`);
    const inside = await inImage(engine, base.ref, 'uname -m; /opt/airlock/node/node -p "process.arch + \' \' + process.version"; /opt/airlock/node/node -e "require(\'/opt/airlock/node_modules/node-pty\'); console.log(\'node-pty ok\')"');
    if (!/aarch64/.test(inside) || !/arm64 v24\./.test(inside) || !inside.includes('node-pty ok')) fail('image', `inside ${base.ref}: ${inside}`);
    results.push(`RESULT image: PASS ${base.ref} ${baseFacts.arch} ${baseFacts.size} ${base.built ? `built in ${secs(Date.now() - t0)}` : 'already built (cached)'}; helper Node ${inside.split('\n')[1] ?? ''}, node-pty loads`);
    log(results.at(-1) as string);

    // 2. The built-in agent on Airlock's arm64 image: write a file, run a command, finish.
    if (only.has('builtin')) {
      await cliRun(env, {
        step: 'built-in agent',
        upstream,
        files: { 'a.txt': 'one\n' },
        args: ['--provider', 'anthropic', '--environment', 'airlock'],
        script: [
          { toolCalls: [{ name: 'write_file', input: { path: 'a.txt', content: 'two\n' } }] },
          { toolCalls: [{ name: 'run_command', input: { command: 'echo "machine=$(uname -m) node=$(node -p process.arch)"' } }] },
          { toolCalls: [{ name: 'finish', input: { summary: 'edited a.txt on arm64' } }] },
        ],
        changed: { path: 'a.txt', content: 'two\n' },
        expectOutput: ['machine=aarch64 node=arm64'],
      });
    }

    // 3. A devcontainer whose Dockerfile is FROM the arm64 base: built, derived, run.
    if (only.has('devcontainer')) {
      const from = process.env.AIRLOCK_SANDBOX_BASE_IMAGE as string;
      t0 = Date.now();
      await cliRun(env, {
        step: 'devcontainer (derived image)',
        upstream,
        files: {
          'a.txt': 'one\n',
          '.devcontainer/devcontainer.json': JSON.stringify({ name: 'arm64-check', build: { dockerfile: 'Dockerfile' } }),
          '.devcontainer/Dockerfile': `FROM ${from}\nRUN echo "devcontainer-$(dpkg --print-architecture)" > /etc/airlock-arm64-marker\n`,
        },
        args: ['--provider', 'anthropic', '--environment', 'devcontainer', '--trust-environment'],
        script: [
          { toolCalls: [{ name: 'run_command', input: { command: 'cat /etc/airlock-arm64-marker; echo "machine=$(uname -m)"' } }] },
          { toolCalls: [{ name: 'write_file', input: { path: 'a.txt', content: 'derived\n' } }] },
          { toolCalls: [{ name: 'finish', input: { summary: 'edited a.txt in the devcontainer' } }] },
        ],
        changed: { path: 'a.txt', content: 'derived\n' },
        expectOutput: ['devcontainer-arm64', 'machine=aarch64'],
      });
    }

    // 4. The agents image: Claude Code and Codex, their arm64 native programs, each completing a run.
    if (only.has('agents')) {
      t0 = Date.now();
      const agents = await ensureSandboxImage({ env: process.env, engine, variant: 'agents', onProgress: progressLog() });
      const facts = await imageFacts(engine, agents.ref);
      // The native programs npm chose: ELF e_machine 0xb7 (EM_AARCH64) at offset 18.
      const natives = await inImage(
        engine,
        agents.ref,
        'for f in $(find /usr/local/lib/node_modules -type f \\( -path "*claude-code*/claude*" -o -path "*codex*linux*/bin/codex" \\) -size +1M 2>/dev/null); do printf "%s %s\\n" "$(od -An -tx1 -j18 -N1 "$f" | tr -d " ")" "${f#/usr/local/lib/node_modules/}"; done',
      );
      const elfs = natives.trim().split('\n').filter((l) => /^[0-9a-f]{2} /.test(l));
      const notArm = elfs.filter((l) => !l.startsWith('b7 '));
      if (!elfs.some((l) => l.startsWith('b7 ') && /claude/.test(l)) || !elfs.some((l) => l.startsWith('b7 ') && /\/codex$/.test(l)) || notArm.length) {
        fail('agents image', `native programs: ${natives.slice(0, 1500)}`);
      }
      results.push(`RESULT agents image: PASS ${agents.ref} ${facts.arch} ${facts.size} ${agents.built ? `built in ${secs(Date.now() - t0)}` : 'already built (cached)'}; aarch64 programs: ${elfs.filter((l) => l.startsWith('b7 ')).map((l) => l.slice(3)).join(', ')}`);
      log(results.at(-1) as string);
      await cliRun(env, {
        step: 'Claude Code',
        upstream,
        files: { 'a.txt': 'one\n' },
        args: ['--agent', 'claude-code', '--provider', 'anthropic', '--model', 'claude-sonnet-4-5', '--environment', 'airlock'],
        script: [
          { toolCalls: [{ name: 'Bash', input: { command: 'echo "claude-on-$(uname -m)" > out.txt && cat out.txt', description: 'write the file' } }] },
          { text: 'All done here.' },
        ],
        changed: { path: 'out.txt', content: 'claude-on-aarch64\n' },
        expectOutput: [],
      });
      await cliRun(env, {
        step: 'Codex',
        upstream,
        files: { 'a.txt': 'one\n' },
        args: ['--agent', 'codex', '--provider', 'openai', '--model', 'gpt-5', '--environment', 'airlock'],
        script: [{ toolCalls: [{ name: 'exec_command', input: { cmd: 'echo "codex-on-$(uname -m)" > out.txt && cat out.txt' } }] }, { text: 'All done here.' }],
        changed: { path: 'out.txt', content: 'codex-on-aarch64\n' },
        expectOutput: [],
      });
    }
    log('SUMMARY');
    for (const r of results) log(r);
  } finally {
    await upstream.close();
    await rm(home, { recursive: true, force: true });
    engine.dispose();
  }
}

/** Build progress, one line per step (the emulated build is long and otherwise silent). */
function progressLog(): (p: { phase: string; message: string }) => void {
  let last = '';
  return (p) => {
    const m = /^step \d+\/\d+/.exec(p.message)?.[0] ?? (p.phase === 'build' ? '' : p.message);
    if (m && m !== last) {
      last = m;
      log(`${p.phase}: ${p.message.slice(0, 160)}`);
    }
  };
}

main().catch((err: unknown) => fail('driver', err instanceof Error ? `${err.message}\n${err.stack ?? ''}` : String(err)));
