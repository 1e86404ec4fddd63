import { randomBytes } from 'node:crypto';
import { AirlockError, toErrorInfo, type ErrorKind } from '../../../contracts/errors';
import { DockerDriver } from '../../sandbox/docker/docker-driver';
import { connectEngine, pingEngine, type Engine } from '../../sandbox/docker/engine';
import { DEFAULT_LIMITS, type ImageProgress } from '../../sandbox/driver';
import { ensureSandboxImage, pruneSandboxImages } from '../../sandbox/image';
import { SandboxManager } from '../../sandbox/sandbox';
import { ExitCode, type CliCommand, type CliIo } from '../command';

/** The outcome of one doctor check. `fail` makes `airlock doctor` exit 3 (unavailable). */
export interface DoctorCheckResult {
  status: 'ok' | 'warn' | 'fail' | 'skip';
  /** One line: what was found. */
  detail: string;
  /** What to do about a warn/fail. */
  fix?: string;
}

/** What checks share: options, output, and values earlier checks found (engine, image ref). */
export interface DoctorContext {
  io: CliIo;
  options: DoctorOptions;
  /** Values left by earlier checks for later ones (e.g. `engine`, `image`). */
  state: Map<string, unknown>;
  /** Writes a progress line (or redraws a bar on a TTY); finish with `progressDone()`. */
  progress(p: ImageProgress): void;
  progressDone(): void;
}

/**
 * One check of `airlock doctor`. Add more (keychain, VM) by passing a longer list to
 * `createDoctorCommand`; a check whose prerequisite failed should return `skip`.
 */
export interface DoctorCheck {
  name: string;
  run(ctx: DoctorContext): Promise<DoctorCheckResult>;
}

export interface DoctorOptions {
  json: boolean;
  build: boolean;
  agents: boolean;
  image?: string;
  /** Remove older airlock-sandbox tags once the current image is ready. */
  prune?: boolean;
}

const FIXES: Partial<Record<ErrorKind, string>> = {
  DOCKER_NOT_INSTALLED: 'Install Docker (Docker Desktop, or docker.io / Docker Engine on Linux), Colima, OrbStack or Podman.',
  DOCKER_NOT_RUNNING: 'Start the engine (Docker Desktop, `sudo systemctl start docker`, `colima start`, `podman machine start`) or set DOCKER_HOST.',
  DOCKER_PERMISSION_DENIED: "Add your user to the 'docker' group (sudo usermod -aG docker $USER; log out and in) or use rootless Docker/Podman.",
  IMAGE_BUILD_FAILED: 'Check access to the Debian mirror and the npm registry, then run `airlock doctor` again.',
  DISK_FULL: 'Free disk space for the engine (`docker system prune`), then run `airlock doctor` again.',
  IMAGE_INCOMPATIBLE: 'Install the missing tools in your image, or drop --image to use Airlock\'s image.',
  NOT_FOUND: 'Run `airlock doctor` without --no-build to build the image, or pull the image you named.',
};

function failed(err: unknown): DoctorCheckResult {
  const info = toErrorInfo(err);
  return { status: 'fail', detail: `${info.message} [${info.kind}]`, fix: FIXES[info.kind] };
}

/** The container engine answers. Leaves `engine` in the state. */
export const engineCheck: DoctorCheck = {
  name: 'container engine',
  async run(ctx) {
    try {
      const engine = await connectEngine(ctx.io.env);
      const v = await pingEngine(engine, ctx.io.env);
      ctx.state.set('engine', engine);
      return { status: 'ok', detail: `${v.version} (API ${v.apiVersion}, ${v.os}) at ${engine.endpoint.display}` };
    } catch (err) {
      return failed(err);
    }
  },
};

/** The sandbox image exists (built now if missing, with progress). Leaves `image` in the state. */
export const imageCheck: DoctorCheck = {
  name: 'sandbox image',
  async run(ctx) {
    const engine = ctx.state.get('engine') as Engine | undefined;
    if (!engine) return { status: 'skip', detail: 'needs a container engine' };
    try {
      const started = Date.now();
      const r = await ensureSandboxImage({
        engine,
        image: ctx.options.image,
        variant: ctx.options.agents ? 'agents' : 'base',
        allowBuild: ctx.options.build,
        onProgress: (p) => ctx.progress(p),
      });
      ctx.progressDone();
      ctx.state.set('image', r.ref);
      const how = ctx.options.image ? 'has node, git and tar' : r.built ? `built in ${Math.round((Date.now() - started) / 1000)} s` : 'present';
      let pruned = '';
      if (ctx.options.prune && !ctx.options.image) {
        const keep = [r.ref];
        if (ctx.options.agents) keep.push((await ensureSandboxImage({ engine, variant: 'base', allowBuild: false })).ref);
        const removed = await pruneSandboxImages({ engine, keep });
        pruned = `; removed ${removed.length} older tag(s)`;
      }
      return { status: 'ok', detail: `${r.ref} (${how})${pruned}` };
    } catch (err) {
      ctx.progressDone();
      return failed(err);
    }
  },
};

/** The helper answers in a throwaway hardened sandbox, which is then wiped and verified gone. */
export const helperCheck: DoctorCheck = {
  name: 'sandbox helper',
  async run(ctx) {
    const engine = ctx.state.get('engine') as Engine | undefined;
    const image = ctx.state.get('image') as string | undefined;
    if (!engine || !image) return { status: 'skip', detail: 'needs the engine and the image' };
    const manager = new SandboxManager(new DockerDriver({ engine, env: ctx.io.env }));
    const runId = `r-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
    const t0 = Date.now();
    try {
      const sandbox = await manager.create({ runId, image, limits: DEFAULT_LIMITS, network: 'none' });
      const ready = Date.now() - t0;
      const hello = sandbox.channel.hello;
      const r = await sandbox.channel.run({ argv: ['true'] });
      const proof = await sandbox.destroy();
      if (r.exitCode !== 0) return { status: 'fail', detail: `\`true\` exited ${r.exitCode} in the sandbox`, fix: 'Rebuild the image: docker rmi the airlock-sandbox tag and run `airlock doctor`.' };
      if (proof.leftovers.length > 0) {
        return { status: 'fail', detail: `wipe left ${proof.leftovers.join(', ')}`, fix: `Remove them with docker rm -f / docker volume rm (label airlock.run=${runId}).` };
      }
      const pty = hello.pty ? 'PTY available' : 'no PTY (node-pty missing)';
      return {
        status: hello.pty ? 'ok' : 'warn',
        detail: `protocol ${hello.version}, node ${hello.node}, uid ${hello.uid}, ${pty}; ready in ${ready} ms, wiped in ${Math.round(proof.durationMs)} ms with nothing left`,
        fix: hello.pty ? undefined : 'Terminals need node-pty in /opt/airlock; use Airlock\'s image.',
      };
    } catch (err) {
      await manager.driver.destroy(runId).catch(() => undefined);
      return failed(err);
    }
  },
};

/** The OS keychain answers (a missing one is a warning: keys can be kept for the session only). */
export const keychainCheck: DoctorCheck = {
  name: 'keychain',
  async run(ctx) {
    const { KeyVault } = await import('../../keys/key-vault');
    const { ProviderCatalog } = await import('../../keys/provider-catalog');
    const { airlockHome } = await import('../../common/paths');
    const status = await new KeyVault(new ProviderCatalog({ home: airlockHome(ctx.io.env) })).status();
    return status.available
      ? { status: 'ok', detail: 'provider keys are stored in the OS keychain' }
      : { status: 'warn', detail: status.message ?? 'no keychain', fix: 'Start a Secret Service (GNOME Keyring, KWallet), or keep keys for this session only.' };
  },
};

/** Which isolation levels work here (containers, QEMU micro-VMs, Lima, WSL2), and why not. */
export const isolationCheck: DoctorCheck = {
  name: 'isolation levels',
  async run(ctx) {
    const { probeIsolation } = await import('../../sandbox/qemu/probe-isolation');
    const engineOk = ctx.state.has('engine');
    const { SettingsStore } = await import('../../app');
    const { airlockHome } = await import('../../common/paths');
    const { vmAccel } = await new SettingsStore(airlockHome(ctx.io.env)).get();
    const probes = await probeIsolation({ env: ctx.io.env, accelSetting: vmAccel, docker: async () => ({ ok: engineOk, reason: engineOk ? '' : 'no container engine' }) });
    const vm = probes.filter((p) => p.kind !== 'docker');
    const line = probes.map((p) => `${p.kind}: ${p.available ? 'yes' : 'no'}${p.accel ? ` (${p.accel})` : ''}${p.reason ? ` — ${p.reason}` : ''}`).join('; ');
    return vm.some((p) => p.available)
      ? { status: 'ok', detail: line }
      : { status: 'warn', detail: line, fix: 'VM isolation is optional: on Linux run scripts/prepare-vm-assets.sh (QEMU); on macOS install Lima.' };
  },
};

/** The checks `airlock doctor` runs by default, in order. */
export function defaultDoctorChecks(): DoctorCheck[] {
  return [engineCheck, imageCheck, helperCheck, keychainCheck, isolationCheck];
}

const USAGE = 'airlock doctor [--json] [--no-build] [--agents] [--image REF] [--prune]';

function parseArgs(args: string[]): DoctorOptions {
  const out: DoctorOptions = { json: false, build: true, agents: false };
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    if (a === '--json') out.json = true;
    else if (a === '--no-build') out.build = false;
    else if (a === '--agents') out.agents = true;
    else if (a === '--prune') out.prune = true;
    else if (a === '--image') {
      const v = args[++i];
      if (!v) throw new AirlockError('INVALID_INPUT', `--image needs an image reference.\nusage: ${USAGE}`);
      out.image = v;
    } else throw new AirlockError('INVALID_INPUT', `unknown option ${a}.\nusage: ${USAGE}`);
  }
  return out;
}

const MARK: Record<DoctorCheckResult['status'], string> = { ok: 'ok  ', warn: 'warn', fail: 'FAIL', skip: 'skip' };

/** Progress output: a redrawn bar on a TTY, one line per build step otherwise. */
function progressWriter(io: CliIo, json: boolean): { progress(p: ImageProgress): void; done(): void } {
  const out = io.stderr as NodeJS.WritableStream & { isTTY?: boolean; columns?: number };
  const tty = Boolean(out.isTTY) && !json;
  let lastStep = -1;
  let drawn = false;
  return {
    progress(p) {
      if (p.phase !== 'build') return;
      if (tty) {
        const width = 24;
        const frac = p.fraction ?? 0;
        const filled = Math.max(0, Math.min(width, Math.round(frac * width)));
        const steps = p.step ? ` ${p.step}/${p.totalSteps}` : '';
        const cols = out.columns ?? 100;
        const line = `  [${'#'.repeat(filled)}${'.'.repeat(width - filled)}]${steps} ${p.message}`.replace(/\s+/g, ' ');
        out.write(`\r\x1b[2K${line.slice(0, cols - 1)}`);
        drawn = true;
      } else if (p.step && p.step !== lastStep) {
        lastStep = p.step;
        out.write(`  building: ${p.message}\n`);
      } else if (!p.step && p.message.startsWith('building ')) {
        out.write(`  ${p.message}\n`);
      }
    },
    done() {
      if (drawn) out.write('\r\x1b[2K');
      drawn = false;
    },
  };
}

/** Runs `checks` in order, prints each with its fix, and returns the exit code. */
export async function runDoctor(checks: DoctorCheck[], io: CliIo, options: DoctorOptions): Promise<number> {
  const writer = progressWriter(io, options.json);
  const ctx: DoctorContext = { io, options, state: new Map(), progress: writer.progress, progressDone: writer.done };
  const results: Array<DoctorCheckResult & { name: string }> = [];
  for (const check of checks) {
    let result: DoctorCheckResult;
    try {
      result = await check.run(ctx);
    } catch (err) {
      result = failed(err);
    }
    writer.done();
    results.push({ name: check.name, ...result });
    if (!options.json) {
      io.stdout.write(`${MARK[result.status]}  ${check.name}: ${result.detail}\n`);
      if (result.fix && (result.status === 'fail' || result.status === 'warn')) io.stdout.write(`      fix: ${result.fix}\n`);
    }
  }
  const ok = results.every((r) => r.status !== 'fail');
  if (options.json) io.stdout.write(`${JSON.stringify({ ok, checks: results }, null, 2)}\n`);
  else io.stdout.write(ok ? 'Airlock is ready.\n' : 'Airlock is not ready: fix the checks marked FAIL and run `airlock doctor` again.\n');
  return ok ? ExitCode.ok : ExitCode.unavailable;
}

/** `airlock doctor` with a given list of checks (add keychain, VM checks here). */
export function createDoctorCommand(checks: () => DoctorCheck[] = defaultDoctorChecks): CliCommand {
  return {
    name: 'doctor',
    summary: 'Check the container engine, the sandbox image (building it if missing) and the sandbox helper.',
    usage: USAGE,
    run: async (args, io) => runDoctor(checks(), io, parseArgs(args)),
  };
}

export const doctorCommand: CliCommand = createDoctorCommand();
