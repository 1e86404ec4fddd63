/**
 * What an audit record can say. Every record is `{ seq, ts, type, data, prev, hash }`; `data`
 * depends on `type`. Records never hold a key, a run token or a model prompt.
 */
export interface AuditRecordData {
  /** The run was created (what was asked, of whom, where). */
  run_created: {
    runId: string;
    projectDir: string;
    agent: string;
    provider: string;
    model: string;
    isolation: string;
    network: string;
    approval: string;
    /** SHA-256 of the task text (the task itself is in the run record). */
    taskSha256: string;
    /** An MCP session: the client as it named itself (docs/architecture.md §17). */
    mcpClient?: string;
  };
  /** A lifecycle transition (queued → preparing → …). */
  lifecycle: { from: string | null; to: string; reason?: string };
  /** One shell command the agent ran, with a digest of its output. */
  command: {
    id: string;
    command: string;
    argv?: string[];
    cwd: string;
    exitCode: number | null;
    durationMs: number;
    timedOut: boolean;
    outputBytes: number;
    /** SHA-256 (hex) of the command's full output as the host received it. */
    outputSha256: string;
  };
  /**
   * A command the agent says it ran (its own command_started/command_exited events, e.g. a CLI agent
   * running its tools itself), with a digest of the output it reported. A claim: nothing the host
   * observed, unlike `command`.
   */
  command_claim: AuditRecordData['command'];
  /** Files changed in the workspace. */
  file_change: { changes: { path: string; kind: 'added' | 'modified' | 'deleted' | 'renamed'; oldPath?: string }[] };
  /** One model call through the proxy. No key, no prompt. */
  model_call: {
    provider: string;
    model: string;
    status: number;
    latencyMs: number;
    inputTokens: number;
    outputTokens: number;
    cacheReadTokens?: number;
    cacheWriteTokens?: number;
    costUsd?: number;
    stream?: boolean;
    error?: string;
  };
  /**
   * The model proxy closed (stripped, or refused the call for) provider-side side doors of a call —
   * provider-side tools, `mcp_servers`, unknown `anthropic-beta` values — or let named ones through
   * because the provider's setting allows them.
   */
  side_door: { provider: string; path: string; stripped: string[]; allowed: string[]; refused?: string };
  /** A command approval (mode `ask`), or the standing policy. */
  approval: { id: string; command: string; approved: boolean; by: 'user' | 'auto' | 'timeout' };
  /** Credential-looking files left out of the sandbox copy. */
  excluded_files: { files: { path: string; reason: string }[] };
  /** The network policy in force, or an egress event under a wider policy. */
  network: {
    policy: 'none' | 'allowlist' | 'open';
    allow?: string[];
    host?: string;
    port?: number;
    allowed?: boolean;
    /** A question put to the user while an intercepted request waited, or an agent-proposed rule, and its answer. */
    approval?: { id: string; kind: 'request' | 'proposal'; method: string; path: string; rule?: string; deniedBy?: string; reason?: string; asked?: true; answer?: 'once' | 'run' | 'project' | 'deny'; by?: 'user' | 'timeout' | 'closed' };
    /** A command secret's host command ran (first use, its life ran out, or a 401): whether it gave a value; never the value. */
    secretFetch?: { secret: string; trigger: 'first use' | 'expired' | '401'; ok: boolean; error?: string; durationMs: number };
  };
  /**
   * The sandbox hit its cap of open connections into host services and connections to `service` were
   * refused: at the first refusal, and with the total (`ended`) once connections are accepted again.
   */
  connections_refused: { service: string; limit: number; refused: number; ended: boolean };
  /**
   * The run's MCP gateway (docs/architecture.md §20): the servers it serves (at `open`), or one tool
   * call — server, tool, a digest of the arguments, the answer's size and the decision. Never an
   * argument, an answer or a credential.
   */
  mcp: {
    /** `ask`: a call waits for the user (`why`); `answer`: the user's answer (`by` user, timeout or closed). */
    event: 'open' | 'call' | 'ask' | 'answer';
    id?: string;
    why?: 'policy' | 'changed' | 'new';
    /** With `ask` for a changed or new tool: the hash of the description the server gives now. */
    descriptionSha256?: string;
    answer?: 'once' | 'run' | 'deny';
    servers?: Array<{ name: string; origin: string; transport: string; tools: number; skipped?: string[]; changed?: string[]; unpinned?: string[]; denied?: string[] }>;
    server?: string;
    tool?: string;
    argsSha256?: string;
    argsBytes?: number;
    decision?: 'allow' | 'deny';
    /** Who decided: the tool's policy, or the user's answer to a question. */
    by?: string;
    reason?: string;
    resultBytes?: number;
    isError?: boolean;
    capped?: boolean;
    durationMs?: number;
  };
  /** The sandbox was removed; `leftovers` empty means verified gone. `unverified`: the engine could not be reached to remove or check. */
  wipe: { removed: string[]; leftovers: string[]; verified: boolean; durationMs: number; verifiedAt: string; unverified?: string; pooledAs?: string };
  /**
   * The result was applied to the project (working tree or a new branch) or written out as a patch.
   * Only ever in the run's apply log, which continues the chain after the seal.
   */
  apply: {
    /** `resolve`: the user's resolution of a conflicted file, written from the merge view. */
    mode: 'working-tree' | 'branch' | 'patch' | 'resolve';
    /**
     * `thread`: a follow-up turn's thread total was applied, not the turn's own change. A
     * `resolve` always names its scope (`turn` or `thread`): the base and result it merged against.
     */
    scope?: 'turn' | 'thread';
    /** The folder applied to (the project, or `--to`); for `patch`, where the patch went (a file, `download`, `clipboard`). */
    target: string;
    branch?: string;
    commit?: string;
    /** Files written to the target. */
    applied: string[];
    /** Files left untouched because the project changed under them, with why. */
    refused: { path: string; reason: string }[];
    /** Clean files not written because others conflicted (an apply is whole or nothing unless asked). */
    held?: string[];
    /** Files the target already had as the result (applied before, or resolved): nothing written. */
    unchanged?: string[];
    /** SHA-256 (hex) of the patch text that was applied (the selected files' part of it). */
    patchSha256: string;
    /** Hunks and lines picked in partly applied files (the rest of those files was left as it was). */
    selection?: { path: string; hunks?: number[]; lines?: string[] }[];
    /**
     * For `resolve`: SHA-256 of the project's file the resolution replaced and of what was written,
     * and of the base and the run's side (host object store, in `scope`) it was merged against.
     */
    resolved?: { path: string; replacedSha256: string; writtenSha256: string; baseSha256: string; theirsSha256: string };
    /** Applied for an MCP client (`run_apply`): the user's yes in the UI, or the server's `--allow-apply` flag. */
    approval?: { via: 'mcp'; client: string; by: 'user' | 'server-flag'; requestId?: string };
  };
  /** An error the run hit (kind + message, no secrets). */
  error: { kind: string; message: string };
  /** `AuditLog.open` found a torn last line (a crash mid-write) and cut it off. */
  log_repaired: { droppedBytes: number; droppedSha256: string };
  /**
   * A follow-up turn (docs/architecture.md §15): what it continues, and what crossed from the
   * parent (the result's files, the agent's session files with their sizes and SHA-256).
   */
  thread: { rootRunId: string; parentRunId: string; turn: number; conversation: 'carried' | 'fresh'; parentWipedAt?: string; resultFiles: number; sessionFiles: { path: string; bytes: number; sha256: string }[] };
  /** Free-form note for anything else worth recording. */
  note: { message: string; [key: string]: unknown };
  /** The log was closed for good; anything after it, or a log without it once the run ended, is suspect. */
  sealed: { count: number };
}

export type AuditRecordType = keyof AuditRecordData;

/** One line of an audit log. */
export interface AuditRecord<T extends AuditRecordType = AuditRecordType> {
  /** 0-based position in the log; equals the line index. */
  seq: number;
  /** ISO 8601 time of the append. */
  ts: string;
  type: T;
  data: AuditRecordData[T];
  /** `hash` of the previous record; 64 zeros for the first. */
  prev: string;
  /** SHA-256 (hex) of the canonical JSON of `{ seq, ts, type, data, prev }`. */
  hash: string;
}

export const GENESIS_HASH = '0'.repeat(64);
