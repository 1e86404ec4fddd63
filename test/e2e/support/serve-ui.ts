import type { AirlockCoreOptions } from '../../../core/app';
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
  /** What `serve` printed to stdout so far. */
  stdout(): string;
}

/**
 * Starts `airlock serve --no-open` in-process with the built renderer, for the e2e tests that
 * drive its UI in Chromium. `warm: false` skips the warm pool (tests that never start a sandbox).
 */
export async function serveUi(opts: { env: NodeJS.ProcessEnv; rendererDir: string; warm?: boolean; args?: string[]; egressProxyForTests?: AirlockCoreOptions['egressProxyForTests']; openExternal?: (url: string) => Promise<void> }): Promise<ServedUi> {
  let services: AirlockServices | undefined;
  let resolveStop!: () => void;
  const stopped = new Promise<void>((r) => (resolveStop = r));
  let onListening!: (h: HostServer) => void;
  const listening = new Promise<HostServer>((r) => (onListening = r));
  const command = createServeCommand({
    createServices: async (e) => (services = await createAirlockServices({ env: e, ...(opts.warm === false ? { warm: false } : {}), ...(opts.egressProxyForTests ? { egressProxyForTests: opts.egressProxyForTests } : {}), ...(opts.openExternal ? { openExternal: opts.openExternal } : {}) })),
    untilStopped: () => ({ stopped, done: () => {} }),
    onListening,
  });
  let printed = '';
  const out = { write: (s: string | Uint8Array) => ((printed += String(s)), true) } as unknown as NodeJS.WritableStream;
  const sink = { write: () => true } as unknown as NodeJS.WritableStream;
  const served = command.run(['--no-open', '--renderer-dir', opts.rendererDir, ...(opts.args ?? [])], { stdout: out, stderr: sink, stdin: process.stdin, env: opts.env });
  const stop = async (): Promise<void> => {
    resolveStop();
    await served.catch(() => undefined);
  };
  try {
    const host = await Promise.race([listening, served.then((code) => { throw new Error(`serve exited with ${code}`); })]);
    return { host, services: services as AirlockServices, stop, stdout: () => printed };
  } catch (err) {
    await stop();
    throw err;
  }
}
