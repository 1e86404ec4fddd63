import { spawn } from 'node:child_process';
import type { AirlockServices } from '../../api/services';
import type { AppContext } from '../../app-context';
import { createApiRouter } from '../../api/router';
import { startHostServer, type HostServer } from '../../host/host-server';
import { defaultRendererDir, hasBuiltRenderer } from '../../host/renderer-dir';
import { numberOption, parseCliArgs, positionalsExactly } from '../args';
import { ExitCode, type CliCommand, type CliIo } from '../command';
import { findTool } from '../../common/resolve-tool';
import { hostToolCwd } from '../../common/host-tool-env';

export interface ServeOptions {
  port: number;
  open: boolean;
  rendererDir?: string;
}

export function parseServeArgs(args: string[]): ServeOptions {
  const { values, positionals } = parseCliArgs(args, { port: { type: 'string' }, 'no-open': { type: 'boolean' }, 'renderer-dir': { type: 'string' } });
  positionalsExactly(positionals);
  return {
    // 0 picks a free port.
    port: numberOption(values.port, 'port', { integer: true, min: 0, max: 65535 }) ?? 0,
    open: values['no-open'] !== true,
    ...(values['renderer-dir'] ? { rendererDir: values['renderer-dir'] } : {}),
  };
}

export interface ServeDeps {
  /** The services over the command's shared pieces (`app`, made by `main` from `env`), when given. */
  createServices(env: NodeJS.ProcessEnv, app?: AppContext): Promise<AirlockServices>;
  /**
   * Resolves when the server should stop (SIGINT/SIGTERM/SIGHUP by default); `done` is called once
   * everything is cleaned up, so signals arriving meanwhile can be answered instead of killing us.
   */
  untilStopped(): { stopped: Promise<void>; done(): void };
  /** Called once listening (tests read the URL here). */
  onListening?(host: HostServer): void;
  openBrowser?(url: string): void;
}

/** The real core (`core/app-services.ts`), loaded only when serving. */
async function createCoreServices(env: NodeJS.ProcessEnv, app?: AppContext): Promise<AirlockServices> {
  const { createAirlockServices } = await import('../../app-services');
  return createAirlockServices({ env, ...(app ? { app } : {}) });
}

const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

/**
 * Resolves on the first SIGINT/SIGTERM/SIGHUP and keeps the handlers installed until `done`: a second
 * Ctrl+C while the warm pool and live sandboxes are being removed is answered, not obeyed (Node's
 * default action would exit before cleanup and leave containers running).
 */
export function untilSignal(stderr: Pick<NodeJS.WritableStream, 'write'> = process.stderr): { stopped: Promise<void>; done(): void } {
  let signalled = false;
  let resolve!: () => void;
  const stopped = new Promise<void>((r) => (resolve = r));
  const onSignal = (): void => {
    if (signalled) {
      stderr.write('Still cleaning up: removing sandboxes so none is left running. Airlock exits when that is done.\n');
      return;
    }
    signalled = true;
    stderr.write('Stopping: removing sandboxes…\n');
    resolve();
  };
  for (const sig of STOP_SIGNALS) process.on(sig, onSignal);
  return {
    stopped,
    done: () => {
      for (const sig of STOP_SIGNALS) process.off(sig, onSignal);
    },
  };
}

async function openInBrowser(url: string): Promise<void> {
  // From PATH only: the CLI often runs in the project folder, which must not supply the opener.
  const cmd = await findTool(process.platform === 'darwin' ? 'open' : process.platform === 'win32' ? 'explorer.exe' : 'xdg-open');
  if (!cmd) return; // no opener installed: the printed URL is enough
  try {
    const child = spawn(cmd, [url], { stdio: 'ignore', detached: true, cwd: hostToolCwd() });
    child.on('error', () => {}); // no opener installed: the printed URL is enough
    child.unref();
  } catch {
    // same: printing the URL is the fallback
  }
}

export function createServeCommand(deps: ServeDeps): CliCommand {
  return {
    name: 'serve',
    summary: 'Serve the Airlock UI in your browser on 127.0.0.1 (the app without Electron).',
    usage: 'airlock serve [--port N] [--no-open] [--renderer-dir DIR]',
    async run(args: string[], io: CliIo): Promise<number> {
      const opts = parseServeArgs(args);
      const rendererDir = opts.rendererDir ?? (await defaultRendererDir(io.env));
      if (!(await hasBuiltRenderer(rendererDir))) {
        io.stderr.write(`airlock serve: no built UI in ${rendererDir}; run 'npm run build' (or 'npm start', which builds it) first\n`);
        return ExitCode.unavailable;
      }
      // Listen for signals before anything is started: a Ctrl+C during startup must still clean up.
      const stop = deps.untilStopped();
      let host: HostServer | undefined;
      let services: AirlockServices | undefined;
      try {
        services = await deps.createServices(io.env, io.app);
        host = await startHostServer({ router: createApiRouter(services), rendererDir, port: opts.port, ...(services.onDidTerminalOutput ? { terminalOutput: services.onDidTerminalOutput } : {}) });
        io.stdout.write(`Airlock is running at ${host.url}\nOpen that URL (it carries this session's token). Ctrl+C stops it.\n`);
        deps.onListening?.(host);
        if (opts.open) (deps.openBrowser ?? openInBrowser)(host.url);
        await stop.stopped;
        return ExitCode.ok;
      } finally {
        try {
          await host?.close();
          await services?.dispose();
        } finally {
          stop.done();
        }
      }
    },
  };
}

/** `airlock serve` with the real core. */
export const serveCommand: CliCommand = createServeCommand({ createServices: createCoreServices, untilStopped: () => untilSignal() });
