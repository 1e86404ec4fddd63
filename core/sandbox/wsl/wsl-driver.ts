import { resolveTool } from '../../common/resolve-tool';
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { AirlockError } from '../../../contracts/errors';
import { airlockHome } from '../../common/paths';
import { Emitter, type Event } from '../../common/disposable';
import type { ChannelStream, IsolationKind, SandboxDriver, SandboxEvent, SandboxInfo, SandboxSpec, WipeProof } from '../driver';
import { spawnChannelStream } from '../qemu/child-channel';
import { runTool, type ToolResult } from '../../common/run-tool';
import { isSafeRunId } from '../qemu/vm-paths';
import {
  decodeWslOutput,
  distroName,
  isDistroNotFound,
  parseWslList,
  WSL_DISTRO_PREFIX,
  wslHelperArgs,
  wslImportArgs,
  wslListArgs,
  wslProbeArgs,
  wslTerminateArgs,
  wslUnregisterArgs,
} from './wsl-cli';
import { pathExists } from '../../common/path-exists';
import { debugLog } from '../../common/debug-log';

/** Runs `wsl.exe` (tests substitute a recorder). */
export type WslRunner = (args: string[], opts?: { timeoutMs?: number }) => Promise<ToolResult>;

export interface WslDriverOptions {
  /** The distribution root filesystem: `docker export` of the sandbox image passed through prepareWslRootfs(). */
  rootfsTar: string;
  /** The host's environment (wsl.exe runs with it; `wslDataDir(env)` by default), from the root. */
  env: NodeJS.ProcessEnv;
  /** Where per-run distributions keep their virtual disks; default `wslDataDir(env)`. */
  distrosDir?: string;
  /** Default `wsl.exe`. */
  wsl?: string;
  /** The image's user inside the distribution. */
  user?: { uid: number; gid: number; home: string };
  runner?: WslRunner;
  openStream?: (args: string[]) => ChannelStream;
}

/**
 * Where the WSL root filesystem and the per-run virtual disks live: Local AppData (`%LOCALAPPDATA%\\Airlock\\wsl`),
 * never the Roaming profile (which domain logons copy around), unless AIRLOCK_HOME names a home.
 */
export function wslDataDir(env: NodeJS.ProcessEnv): string {
  if (!env.AIRLOCK_HOME && env.LOCALAPPDATA) return path.win32.join(env.LOCALAPPDATA, 'Airlock', 'wsl');
  return path.join(airlockHome(env), 'wsl');
}


/**
 * SandboxDriver for Windows over WSL2: one imported distribution per run (see wsl-cli.ts). The
 * channel is the stdio of `wsl.exe -d airlock-<run> … node /opt/airlock/helper.js`.
 * NOT run on a real Windows machine in this repository's CI: see resources/vm/README.md.
 */
export class WslDriver implements SandboxDriver {
  readonly kind: IsolationKind = 'wsl';
  private readonly emitter = new Emitter<SandboxEvent>();
  readonly onDidEvent: Event<SandboxEvent> = this.emitter.event;
  private readonly run: WslRunner;
  private readonly distrosDir: string;
  private readonly limits = new Map<string, number>();

  constructor(private readonly opts: WslDriverOptions) {
    const bin = opts.wsl ?? 'wsl.exe';
    // WSL_UTF8=1 makes newer wsl.exe print UTF-8; decodeWslOutput handles both.
    this.run = opts.runner ?? ((args, o) => runTool(bin, args, { timeoutMs: o?.timeoutMs ?? 120_000, env: { ...opts.env, WSL_UTF8: '1' } }));
    this.distrosDir = opts.distrosDir ?? wslDataDir(opts.env);
  }

  private async wsl(args: string[], timeoutMs = 120_000): Promise<{ code: number | null; text: string }> {
    const r = await this.run(args, { timeoutMs });
    return { code: r.code, text: `${decodeWslOutput(r.stdout)}\n${r.stderr}`.trim() };
  }

  async create(spec: SandboxSpec): Promise<SandboxInfo> {
    if (!isSafeRunId(spec.runId)) throw new AirlockError('INVALID_INPUT', `run id '${spec.runId}' must be letters, digits, '.', '_' or '-'.`);
    if (spec.network !== 'none') throw new AirlockError('INVALID_INPUT', `The WSL sandbox supports only the 'none' network policy for now; got '${spec.network}'.`);
    if (!(await pathExists(this.opts.rootfsTar))) {
      throw new AirlockError('VM_UNAVAILABLE', `The WSL root filesystem ${this.opts.rootfsTar} is missing; prepare it from the sandbox image (resources/vm/README.md).`);
    }
    const name = distroName(spec.runId);
    const dir = path.join(this.distrosDir, spec.runId);
    await mkdir(dir, { recursive: true });
    const r = await this.wsl(wslImportArgs(name, dir, this.opts.rootfsTar), 10 * 60_000);
    if (r.code !== 0) {
      await this.destroy(spec.runId).catch(debugLog.swallow('wsl.create.cleanup'));
      if (/WSL_E_WSL_OPTIONAL_COMPONENT_REQUIRED|HCS_E_HYPERV_NOT_INSTALLED|not installed/i.test(r.text)) {
        throw new AirlockError('VM_UNAVAILABLE', `WSL2 is not installed or not enabled (${r.text.slice(0, 300)}). Run \`wsl --install\` as administrator and restart.`);
      }
      throw new AirlockError('SANDBOX_FAILED', `wsl --import failed for run ${spec.runId}: ${r.text.slice(-800)}`);
    }
    this.limits.set(name, spec.limits.pids);
    this.emitter.fire({ type: 'created', runId: spec.runId, id: name });
    this.emitter.fire({ type: 'started', runId: spec.runId, id: name });
    return { id: name, runId: spec.runId, kind: 'wsl', state: 'running', createdAt: new Date().toISOString() };
  }

  async openChannel(sandboxId: string): Promise<ChannelStream> {
    if (!sandboxId.startsWith(WSL_DISTRO_PREFIX) || !isSafeRunId(sandboxId.slice(WSL_DISTRO_PREFIX.length))) {
      throw new AirlockError('INVALID_INPUT', `'${sandboxId}' is not an Airlock WSL distribution.`);
    }
    const user = this.opts.user ?? { uid: 1000, gid: 1000, home: '/home/airlock' };
    const args = wslHelperArgs(sandboxId, { ...user, pids: this.limits.get(sandboxId) ?? 512 });
    if (this.opts.openStream) return this.opts.openStream(args);
    return spawnChannelStream(await resolveTool(this.opts.wsl ?? 'wsl.exe', this.opts.env), args, { env: this.opts.env });
  }

  /**
   * Whether `name` is no longer registered. `wsl --list` answers when other distributions remain;
   * when none does, it fails with a localized message and no code, so that failure is confirmed by
   * starting `name`, which fails with the (never localized) WSL_E_DISTRO_NOT_FOUND when it is gone.
   */
  private async gone(name: string): Promise<boolean> {
    const r = await this.run(wslListArgs(), { timeoutMs: 60_000 });
    if (r.code === 0) return !parseWslList(decodeWslOutput(r.stdout)).some((d) => d.name === name);
    const probe = await this.wsl(wslProbeArgs(name), 60_000);
    if (probe.code !== 0 && isDistroNotFound(probe.text)) return true;
    if (probe.code === 0) return false;
    const listed = `${decodeWslOutput(r.stdout)}\n${r.stderr}`.trim();
    throw new AirlockError('VM_UNAVAILABLE', `Could not check that the WSL distribution ${name} is gone: wsl --list failed (${listed.slice(-300)}) and so did starting it (${probe.text.slice(-300)}).`);
  }

  async destroy(runId: string): Promise<WipeProof> {
    const t0 = performance.now();
    const name = distroName(runId);
    const dir = path.join(this.distrosDir, runId);
    const removed: string[] = [];
    await this.wsl(wslTerminateArgs(name), 60_000);
    const un = await this.wsl(wslUnregisterArgs(name), 120_000);
    if (un.code === 0) removed.push(`distribution:${name}`);
    else if (!isDistroNotFound(un.text)) throw new AirlockError('SANDBOX_FAILED', `wsl --unregister ${name} failed: ${un.text.slice(-500)}`);
    if (await pathExists(dir)) {
      await rm(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
      removed.push(`dir:${dir}`);
    }
    this.limits.delete(name);
    const leftovers: string[] = [];
    if (!(await this.gone(name))) leftovers.push(`distribution:${name}`);
    if (await pathExists(dir)) leftovers.push(`dir:${dir}`);
    const proof: WipeProof = { runId, removed, leftovers, durationMs: performance.now() - t0, verifiedAt: new Date().toISOString() };
    this.emitter.fire({ type: 'destroyed', runId, proof });
    return proof;
  }

  async list(): Promise<SandboxInfo[]> {
    const r = await this.run(wslListArgs(), { timeoutMs: 60_000 });
    const text = decodeWslOutput(r.stdout);
    if (r.code !== 0) return [];
    return parseWslList(text)
      .filter((d) => d.name.startsWith(WSL_DISTRO_PREFIX))
      .map((d) => ({ id: d.name, runId: d.name.slice(WSL_DISTRO_PREFIX.length), kind: 'wsl' as const, state: d.state.toLowerCase(), createdAt: '' }));
  }

  dispose(): void {
    this.emitter.dispose();
  }
}
