import { createAirlockServices } from '../../../core/app-services';
import type { AirlockServices } from '../../../core/api/services';
import { createServeCommand } from '../../../core/cli/commands/serve';
import type { HostServer } from '../../../core/host/host-server';

/** `airlock serve` running in the test's process: the real core behind the real host server. */
export interface ServedUi {
  host: HostServer;
  services: AirlockServices;
  /** Ends `serve` the way a signal does (warm pool and sandboxes cleaned up) and waits for it. */
  stop(): Promise<void>;
}

/**
 * Starts `airlock serve --no-open` in-process with the built renderer, for the e2e tests that
 * drive its UI in Chromium. `warm: false` skips the warm pool (tests that never start a sandbox).
 */
export async function serveUi(opts: { env: NodeJS.ProcessEnv; rendererDir: string; warm?: boolean }): Promise<ServedUi> {
  let services: AirlockServices | undefined;
  let resolveStop!: () => void;
  const stopped = new Promise<void>((r) => (resolveStop = r));
  let onListening!: (h: HostServer) => void;
  const listening = new Promise<HostServer>((r) => (onListening = r));
  const command = createServeCommand({
    createServices: async (e) => (services = await createAirlockServices({ env: e, ...(opts.warm === false ? { warm: false } : {}) })),
    untilStopped: () => ({ stopped, done: () => {} }),
    onListening,
  });
  const sink = { write: () => true } as unknown as NodeJS.WritableStream;
  const served = command.run(['--no-open', '--renderer-dir', opts.rendererDir], { stdout: sink, stderr: sink, stdin: process.stdin, env: opts.env });
  const stop = async (): Promise<void> => {
    resolveStop();
    await served.catch(() => undefined);
  };
  try {
    const host = await Promise.race([listening, served.then((code) => { throw new Error(`serve exited with ${code}`); })]);
    return { host, services: services as AirlockServices, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
