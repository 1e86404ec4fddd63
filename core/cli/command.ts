import type { AppContext } from '../app-context';
import type { EgressProxyForTests } from '../network/run-network';

/** Streams and environment a CLI command works with (injected so tests can capture them). */
export interface CliIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  env: NodeJS.ProcessEnv;
  /**
   * The shared pieces (home, settings, catalog, vault, store, engine) made once from `env` by `main`;
   * a command called directly without it gets one made from `env` (`withApp`).
   */
  app?: AppContext;
  /**
   * Tests only (in-process `main`): the runs' egress proxy resolver and loopback switch, as
   * `AirlockCoreOptions.egressProxyForTests`. Code-only: no flag or variable reaches it.
   */
  egressProxyForTests?: EgressProxyForTests;
}

/** Exit codes scripts can rely on. */
export const ExitCode = {
  ok: 0,
  failure: 1,
  usage: 2,
  /** A prerequisite (engine, keychain, image) is missing. */
  unavailable: 3,
  /** The run ended cancelled, failed or interrupted. */
  runNotDone: 4,
  /** An apply left conflicting files untouched. */
  conflict: 5,
} as const;

/** One top-level CLI command (`airlock <name> …`). */
export interface CliCommand {
  name: string;
  summary: string;
  usage: string;
  run(args: string[], io: CliIo): Promise<number>;
}
