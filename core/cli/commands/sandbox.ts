import { newRunId } from '../../../contracts/ids';
import { writeFile } from 'node:fs/promises';
import { DEFAULT_LIMITS, type WipeProof } from '../../sandbox/driver';
import type { AppContext } from '../../app-context';
import { DockerDriver } from '../../sandbox/docker/docker-driver';
import type { Engine } from '../../sandbox/docker/engine';
import { ensureSandboxImage } from '../../sandbox/image';
import { SandboxManager, type Sandbox } from '../../sandbox/sandbox';
import { finalPatch, listChanges, type FileChange } from '../../workspace/changes';
import { hydrate } from '../../workspace/hydrate';
import { classifyRiskyPaths } from '../../workspace/risky-paths';
import { formatBytes } from '../../../contracts/format';
import { snapshotProject } from '../../workspace/snapshot';
import { CliUsageError, numberOption, parseCliArgs, positionalsExactly } from '../args';
import { ExitCode, type CliCommand, type CliIo } from '../command';
import { withApp } from '../with-app';

interface ExecArgs {
  projectDir: string;
  argv: string[];
  image?: string;
  timeoutSec?: number;
  include: string[];
  exclude: string[];
  patchFile?: string;
  showDiff: boolean;
}

const USAGE =
  'airlock sandbox exec <projectDir> [--image REF] [--timeout SECONDS] [--include PATTERN]… [--exclude PATTERN]… [--patch FILE] [--no-diff] -- <command…>';

function parseExec(args: string[]): ExecArgs {
  // Everything after `--` is the command, options included: it is split off before parsing.
  const dash = args.indexOf('--');
  const { values, positionals } = parseCliArgs(dash < 0 ? args : args.slice(0, dash), {
    image: { type: 'string' },
    timeout: { type: 'string' },
    include: { type: 'string', multiple: true },
    exclude: { type: 'string', multiple: true },
    patch: { type: 'string' },
    'no-diff': { type: 'boolean' },
  });
  const [projectDir] = positionalsExactly(positionals, '<projectDir>');
  if (dash < 0 || dash === args.length - 1) throw new CliUsageError("give the command after '--'");
  const timeoutSec = numberOption(values.timeout, 'timeout', { min: 0.001 });
  return {
    projectDir,
    argv: args.slice(dash + 1),
    include: values.include ?? [],
    exclude: values.exclude ?? [],
    showDiff: values['no-diff'] !== true,
    ...(values.image ? { image: values.image } : {}),
    ...(timeoutSec !== undefined ? { timeoutSec } : {}),
    ...(values.patch ? { patchFile: values.patch } : {}),
  };
}

function statusLetter(c: FileChange): string {
  return c.status === 'added' ? 'A' : c.status === 'deleted' ? 'D' : c.status === 'renamed' ? 'R' : 'M';
}

function describeChange(c: FileChange): string {
  const name = c.oldPath ? `${c.oldPath} → ${c.path}` : c.path;
  const parts: string[] = [];
  if (c.binary) parts.push(`binary, ${formatBytes(c.size)}`);
  else if (c.additions || c.deletions) parts.push(`+${c.additions} −${c.deletions}`);
  if (c.modeChanged) parts.push(`mode ${c.oldMode} → ${c.newMode}`);
  if (c.tooLarge) parts.push('large');
  return `  ${statusLetter(c)} ${name}${parts.length ? `  (${parts.join(', ')})` : ''}`;
}

function describeProof(proof: WipeProof): string {
  const state = proof.leftovers.length ? `LEFTOVERS: ${proof.leftovers.join(', ')}` : 'verified: nothing labelled with the run remains';
  return `wiped run ${proof.runId}: removed ${proof.removed.length} resource(s) in ${Math.round(proof.durationMs)} ms; ${state}`;
}

/** Exit code of the sandboxed command as a shell would report it. */
function exitCodeOf(info: { exitCode: number | null; signal: string | null; timedOut: boolean }): number {
  if (info.timedOut) return 124;
  if (info.exitCode !== null) return info.exitCode;
  const signals: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGKILL: 9, SIGTERM: 15 };
  return 128 + (signals[info.signal ?? ''] ?? 9);
}

async function execInSandbox(args: ExecArgs, io: CliIo): Promise<number> {
  const say = (line: string) => io.stderr.write(`airlock: ${line}\n`);
  const snapshot = await snapshotProject(args.projectDir, { include: args.include, exclude: args.exclude });
  say(`project ${snapshot.projectDir}: ${snapshot.fileCount} files, ${formatBytes(snapshot.totalBytes)}`);

  return withApp(io, async (app) => {
    const engine = await app.connectEngine();
    try {
      return await execWithEngine(args, io, app, engine, snapshot, say);
    } finally {
      engine.dispose();
    }
  });
}

async function execWithEngine(args: ExecArgs, io: CliIo, app: AppContext, engine: Engine, snapshot: Awaited<ReturnType<typeof snapshotProject>>, say: (line: string) => void): Promise<number> {
  const image = await ensureSandboxImage({
    engine,
    ...(args.image ? { image: args.image } : {}),
    onProgress: (p) => {
      if (p.phase !== 'build' || /^step /.test(p.message)) say(`image: ${p.message}`);
    },
  });
  const installation = await app.installationId();
  const manager = new SandboxManager(new DockerDriver({ env: io.env, engine, installationId: installation }), { installationId: installation });
  const runId = newRunId();
  let sandbox: Sandbox | undefined;
  let interrupted = false;
  let kill: (() => void) | undefined;
  const onSigint = () => {
    interrupted = true;
    say('interrupted: stopping the command and wiping the sandbox');
    kill?.();
  };
  process.once('SIGINT', onSigint);
  try {
    sandbox = await manager.create({ runId, image: image.ref, limits: DEFAULT_LIMITS, network: 'none' });
    say(`sandbox ${sandbox.info.id.slice(0, 12)} ready (image ${image.ref}, no network)`);
    // The agent command may start once the copy is in place; change queries wait for the baseline.
    const hydrated = await hydrate(sandbox.channel, snapshot, { waitForBaseline: false });
    say(`copied in ${hydrated.files} files (${formatBytes(hydrated.bytes)}) in ${Math.round(hydrated.durationMs)} ms`);
    const notable = hydrated.excluded.filter((e) => e.kind !== 'gitignore' && e.kind !== 'git');
    const ignoredCount = hydrated.excluded.length - notable.length;
    if (notable.length) {
      say(`left on the host (${notable.length}):`);
      for (const e of notable) io.stderr.write(`  - ${e.path}: ${e.reason}\n`);
    }
    if (ignoredCount) say(`also left out: ${ignoredCount} path(s) from .gitignore and git metadata`);
    if (interrupted) return ExitCode.runNotDone;

    say(`$ ${args.argv.map((a) => (/^[\w./:=@+-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`)).join(' ')}`);
    const proc = sandbox.channel.spawn({
      argv: args.argv,
      cwd: '/workspace',
      ...(args.timeoutSec ? { timeoutMs: args.timeoutSec * 1000 } : {}),
    });
    proc.onStdout((chunk) => io.stdout.write(chunk));
    proc.onStderr((chunk) => io.stderr.write(chunk));
    proc.end();
    kill = () => proc.kill('SIGTERM');
    const exit = await proc.exited;
    kill = undefined;
    const code = exitCodeOf(exit);
    say(`command ${exit.timedOut ? `timed out after ${args.timeoutSec} s` : `exited with ${exit.exitCode ?? exit.signal}`} (${Math.round(exit.durationMs)} ms)${exit.truncated ? '; output truncated' : ''}`);

    const changes = await listChanges(sandbox.channel);
    if (!changes.length) {
      say('no files changed');
    } else {
      say(`${changes.length} file(s) changed:`);
      for (const c of changes) io.stderr.write(`${describeChange(c)}\n`);
      const patch = await finalPatch(sandbox.channel);
      const risky = classifyRiskyPaths(changes.map((c) => ({ path: c.path, ...(c.oldPath ? { oldPath: c.oldPath } : {}), ...(c.oldMode ? { oldMode: c.oldMode } : {}), ...(c.newMode ? { newMode: c.newMode } : {}) })));
      for (const r of risky) say(`review: ${r.path} — ${r.reason}`);
      if (args.patchFile) {
        await writeFile(args.patchFile, patch, { flag: 'wx' });
        say(`patch written to ${args.patchFile} (git apply it in the project to keep the changes)`);
      }
      if (args.showDiff) io.stdout.write(patch);
    }
    return interrupted ? ExitCode.runNotDone : code;
  } finally {
    process.off('SIGINT', onSigint);
    if (sandbox) {
      const proof = await sandbox.destroy();
      say(describeProof(proof));
    } else {
      const proof = await manager.driver.destroy(runId).catch(() => undefined);
      if (proof && proof.removed.length) say(describeProof(proof));
    }
    manager.dispose();
  }
}

/**
 * `airlock sandbox exec <projectDir> -- <cmd…>`: one command in a fresh hardened sandbox on a copy of
 * the project; streams its output, prints the changed files and the diff, wipes the sandbox (with
 * proof) and exits with the command's exit code. The project folder is only read.
 */
export const sandboxCommand: CliCommand = {
  name: 'sandbox',
  summary: 'Run one command in a fresh sandbox on a copy of a project and show the diff it caused.',
  usage: USAGE,
  async run(args: string[], io: CliIo): Promise<number> {
    const [sub, ...rest] = args;
    if (sub !== 'exec') {
      if (sub?.startsWith('-')) parseExec(args); // an unknown option is named as such
      throw new CliUsageError(sub ? `unknown subcommand '${sub.slice(0, 40)}'` : 'name a subcommand');
    }
    return execInSandbox(parseExec(rest), io);
  },
};
