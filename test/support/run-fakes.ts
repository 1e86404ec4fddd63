import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { AirlockError } from '../../contracts/errors';
import type { AgentAdapter } from '../../core/agents';
import type { ChannelProcess, ConnectionsRefused } from '../../core/channel/channel-client';
import { Emitter, toDisposable } from '../../core/common/disposable';
import type { RunProxy, RunServiceDeps, RunWorkspace } from '../../core/runs/run-context';
import { RunStore } from '../../core/runs/run-store';
import type { WipeProof } from '../../core/sandbox/driver';
import type { Sandbox } from '../../core/sandbox/sandbox';
import type { CollectedResult } from '../../core/workspace/collect';
import type { HostRepo } from '../../core/workspace/host-repo';
import type { HydrateResult } from '../../core/workspace/hydrate';
import { BaseMismatchError } from '../../core/workspace/hydrate-base';
import type { BaseRecord } from '../../core/workspace/project-base';
import type { ProjectSnapshot } from '../../core/workspace/snapshot';
import { testGit } from './workspace-fixtures';

/**
 * Fakes of the parts a run drives (sandbox and its channel, model proxy, workspace operations,
 * agent), for unit tests of the run's steps. Every call is written to `log` in the order it
 * happened, so a test can check what ran, in which order, and what was skipped. The run store is
 * the real one, on a temporary folder.
 */
export interface RunFakes {
  log: string[];
  deps: RunServiceDeps;
  /** Makes one named operation fail (`snapshot`, `create`, `hydrate`, `exposeHostService`, `collect`, `destroy`). */
  failAt(step: string): void;
  /** How the agent process ends (default exit 0); `hang` waits for a kill. */
  agentExit: { code: number | 'hang' };
  /** Tokens issued and not revoked. */
  liveTokens: Set<string>;
  /** The channel says the sandbox hit its connection cap (as ChannelClient does). */
  refuseConnections(e: ConnectionsRefused): void;
  /**
   * Gives the run a project base (`deps.bases`) whose copy fails its check at hydrate when
   * `mismatch` is set: the steps must fall back to a sandbox made afresh.
   */
  useBase(opts: { mismatch: boolean }): void;
  dispose(): Promise<void>;
}

export async function createRunFakes(): Promise<RunFakes> {
  const home = await mkdtemp(path.join(os.tmpdir(), 'airlock-run-fakes-'));
  const store = new RunStore({ git: testGit, home });
  const log: string[] = [];
  const failing = new Set<string>();
  const agentExit: RunFakes['agentExit'] = { code: 0 };
  const liveTokens = new Set<string>();
  const maybeFail = (what: string) => {
    log.push(what);
    if (failing.has(what)) throw new AirlockError('SANDBOX_FAILED', `${what} failed (fake)`);
  };
  let tokens = 0;
  let sandboxes = 0;
  const base = { mismatch: false };
  const refused = new Emitter<ConnectionsRefused>();

  const agentProcess = (argv: string[]): ChannelProcess => {
    const stdout = new Emitter<Buffer>();
    const stderr = new Emitter<Buffer>();
    let resolveExit: (code: number | null) => void = () => undefined;
    const exited = new Promise<number | null>((resolve) => (resolveExit = resolve)).then((exitCode) => ({ exitCode, signal: null, timedOut: false, truncated: false, durationMs: 1, outputBytes: 0 }));
    log.push(`spawn ${argv.join(' ')}`);
    // The agent "works" on the next tick, then exits as told.
    setImmediate(() => {
      if (agentExit.code !== 'hang') resolveExit(agentExit.code);
    });
    return {
      id: 1,
      onStdout: stdout.event,
      onStderr: stderr.event,
      exited,
      write: () => undefined,
      end: () => undefined,
      kill: (signal) => {
        log.push(`kill ${signal ?? 'SIGTERM'}`);
        resolveExit(null);
      },
      resize: () => undefined,
    };
  };

  const sandbox = (runId: string): Sandbox => {
    const id = `sb-${++sandboxes}`;
    const fake = {
      info: { id, runId, kind: 'docker', state: 'running', createdAt: new Date().toISOString() },
      runId,
      channel: {
        spawn: (opts: { argv: string[] }) => agentProcess(opts.argv),
        onDidRefuseConnections: refused.event,
        exposeHostService: async () => {
          maybeFail('exposeHostService');
          return { port: 40123, ...toDisposable(() => log.push('unexpose')) };
        },
      },
      destroy: async (): Promise<WipeProof> => {
        maybeFail('destroy');
        log.push(`destroyed ${id}`);
        return { runId, removed: [id], leftovers: [], durationMs: 5, verifiedAt: new Date().toISOString() };
      },
    };
    // Only what the steps use is faked; the rest of Sandbox is never reached in these tests.
    return fake as unknown as Sandbox;
  };

  const proxy: RunProxy = {
    onDidCall: new Emitter<never>().event,
    onDidSideDoor: new Emitter<never>().event,
    issueToken: ({ runId }) => {
      const token = `token-${runId}-${++tokens}`;
      log.push('issueToken');
      liveTokens.add(token);
      return { token, ...toDisposable(() => liveTokens.delete(token)) };
    },
    revokeRun: () => {
      log.push('revokeRun');
      liveTokens.clear();
    },
    usage: () => ({ inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, requests: 0 }),
    budgetStop: () => undefined,
  };

  const snapshot: ProjectSnapshot = { projectDir: home, isGit: false, entries: [], excluded: [{ path: '.env', kind: 'secret-name', reason: 'environment file' }], fileCount: 0 } as unknown as ProjectSnapshot;
  const workspace: RunWorkspace = {
    snapshot: async () => {
      maybeFail('snapshot');
      return snapshot;
    },
    hydrate: async (_sandbox, _snapshot, _objects, opts) => {
      maybeFail('hydrate');
      if (opts.base && base.mismatch) throw new BaseMismatchError('the base changed on the engine (fake)');
      const hydrated: HydrateResult = { files: 0, bytes: 0, durationMs: 1, baselineCommit: 'base', baselineReady: Promise.resolve(), excluded: [], manifest: [] };
      // The steps only hand the object store on to collect (faked here too).
      return { ...hydrated, repo: {} as HostRepo };
    },
    watch: async () => {
      log.push('watch');
      return toDisposable(() => log.push('unwatch'));
    },
    collect: async (): Promise<CollectedResult> => {
      maybeFail('collect');
      const patch = Buffer.from('diff --git a/a.txt b/a.txt\n');
      const section = { offset: 0, length: patch.length, sha256: createHash('sha256').update(patch).digest('hex') };
      const change = { path: 'a.txt', status: 'added' as const, binary: false, additions: 1, deletions: 0, size: 2, oldSize: 0, newMode: '100644', modeChanged: false, tooLarge: false, oldOid: '0', newOid: '1', section };
      return { patch, result: { version: 2, baseCommit: 'base', resultCommit: 'result', patchSha256: section.sha256, changes: [change], skipped: [] } };
    },
    store: async () => {
      log.push('store');
    },
  };

  const agent: AgentAdapter = {
    id: 'custom',
    terminal: 'raw',
    imageVariant: 'base',
    supportsApproval: false,
    providerFormats: ['anthropic', 'openai'],
    command: (ctx) => ({ argv: ['agent', ctx.proxyBaseUrl], env: { AIRLOCK_TASK: ctx.task } }),
    createParser: () => ({ push: () => [], end: () => [] }),
  };

  const deps: RunServiceDeps = {
    store,
    sandboxes: async () => ({
      create: async (spec) => {
        maybeFail('create');
        return sandbox(spec.runId);
      },
      reapOrphans: async () => [],
    }),
    image: async () => {
      log.push('image');
      return 'airlock-sandbox:fake';
    },
    proxy,
    proxyPort: 1,
    providerFormat: async () => 'anthropic',
    agent: () => agent,
    workspace,
  };

  return {
    log,
    deps,
    failAt: (step) => failing.add(step),
    agentExit,
    liveTokens,
    refuseConnections: (e) => refused.fire(e),
    useBase: (opts) => {
      base.mismatch = opts.mismatch;
      const record = { volume: 'airlock-base-fake', createdAt: new Date().toISOString() } as unknown as BaseRecord;
      deps.bases = {
        claim: async () => {
          log.push('claim base');
          return { record, objectsDir: path.join(home, 'base-objects') };
        },
        refresh: async () => {
          log.push('refresh base');
        },
        discard: async () => {
          log.push('discard base');
        },
      };
    },
    dispose: async () => {
      store.dispose();
      await rm(home, { recursive: true, force: true });
    },
  };
}
