import type { Channel, ChannelArgs, ChannelOutput, EventName, EventPayload } from '../../contracts';
import type { Disposable, Event } from '../common/disposable';
import type { TerminalOutput } from '../common/terminal-output';

/** The domains of the contracts: `runs`, `keys`, `providers`, `sandboxes`, `diffs`, … */
export type Domain = Channel extends `${infer D}:${string}` ? D : never;

/**
 * One domain's service, derived from the contracts: channel `runs:start` becomes method
 * `runs.start(args)`, event `runs:onDidChangeStatus` becomes the Event `runs.onDidChangeStatus`.
 * Handlers receive validated input (defaults applied) and return the contract's output; they throw
 * AirlockError for expected failures (the router turns anything thrown into an envelope).
 */
export type DomainService<D extends string> = {
  [C in Channel as C extends `${D}:${infer Verb}` ? Verb : never]: (args: ChannelArgs<C>) => Promise<ChannelOutput<C>>;
} & {
  [E in EventName as E extends `${D}:${infer Name}` ? Name : never]: Event<EventPayload<E>>;
};

/**
 * Everything the UI (Electron IPC or the WebSocket host) can call. Implemented by the core
 * (`core/app.ts`, `createAirlockServices`); the transports reach it only through `createApiRouter`.
 */
export type AirlockServices = { [D in Domain]: DomainService<D> } & {
  /** Runs that have not reached a final state (asked before quitting). */
  activeRunIds(): Promise<string[]>;
  /** Every port a live run has published (the desktop app's window opens only these loopback links). */
  previewPorts(): Array<{ sandboxPort: number; hostPort: number }>;
  /** Stops everything: cancels and wipes live runs, closes the proxy. */
  dispose(): Promise<void>;
  /**
   * Terminal output as bytes, for a transport that carries bytes (the browser's terminal stream);
   * `terminals.onDidData` is the same output as text. Absent where nothing produces bytes (fakes).
   */
  onDidTerminalOutput?: Event<TerminalOutput>;
};

export type RunsService = AirlockServices['runs'];
export type KeysService = AirlockServices['keys'];
export type ProvidersService = AirlockServices['providers'];
export type SandboxesService = AirlockServices['sandboxes'];
export type DiffsService = AirlockServices['diffs'];
export type TerminalsService = AirlockServices['terminals'];
export type SettingsService = AirlockServices['settings'];
export type AuditService = AirlockServices['audit'];
export type ProjectsService = AirlockServices['projects'];
export type McpService = AirlockServices['mcp'];
export type AttemptsService = AirlockServices['attempts'];
export type EnvironmentsService = AirlockServices['environments'];

export type { Disposable };
