import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { AirlockError } from '../../../contracts/errors';
import { parseStoredJson } from '../../common/stored-json';
import type { AirlockServices } from '../../api/services';
import type { AppContext } from '../../app-context';
import { createApiRouter } from '../../api/router';
import { startHostServer, type HostServer } from '../../host/host-server';
import { defaultRendererDir, hasBuiltRenderer } from '../../host/renderer-dir';
import { numberOption, parseCliArgs, positionalsExactly } from '../args';
import { ExitCode, type CliCommand, type CliIo } from '../command';
import { openInBrowser } from '../open-in-browser';
import { withApp } from '../with-app';
import { debugLog } from '../../common/debug-log';
import { writeDurably } from '../../common/stored-file';

export interface ServeOptions {
  /** Given with --port (0: any free port); absent: the port this data folder used last, if free. */
  port?: number;
  open: boolean;
  rendererDir?: string;
}

export function parseServeArgs(args: string[]): ServeOptions {
  const { values, positionals } = parseCliArgs(args, { port: { type: 'string' }, 'no-open': { type: 'boolean' }, 'renderer-dir': { type: 'string' } });
  positionalsExactly(positionals);
  const port = numberOption(values.port, 'port', { integer: true, min: 0, max: 65535 });
  return {
    ...(port !== undefined ? { port } : {}),
    open: values['no-open'] !== true,
    ...(values['renderer-dir'] ? { rendererDir: values['renderer-dir'] } : {}),
  };
}

export interface ServeDeps {
  /** The services over the command's shared pieces (`app`, made by `main` from `env`), when given. */
  createServices(env: NodeJS.ProcessEnv, app: AppContext): Promise<AirlockServices>;
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
async function createCoreServices(env: NodeJS.ProcessEnv, app: AppContext): Promise<AirlockServices> {
  const { createAirlockServices } = await import('../../app-services');
  // The user's browser on this machine, for an MCP server's sign-in page (the URL is checked first).
  return createAirlockServices({ env, app, openExternal: (url) => openInBrowser(url, env) });
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

/** Where `serve` remembers its port for a data folder: `<AIRLOCK_HOME>/serve.json`. */
const servePortFile = (home: string) => path.join(home, 'serve.json');

/** `serve.json`: the port `airlock serve` used last for this data folder. */
const ServePortFile = z.object({ port: z.number().int().min(1).max(65535) });

/**
 * The port this data folder served on last, if recorded. A damaged file is INVALID_INPUT naming it
 * and the field; `serve` says so and picks a new port (the file is only a convenience, rewritten then).
 */
export async function lastServePort(home: string): Promise<number | undefined> {
  const file = servePortFile(home);
  const text = await readFile(file, 'utf8').catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return undefined;
    throw err;
  });
  if (text === undefined) return undefined;
  return parseStoredJson(ServePortFile, file, text, 'serving on a new port, which replaces it.').port;
}

async function saveServePort(home: string, port: number): Promise<void> {
  // Best effort: the port is only a convenience (the next serve reuses it when free).
  await writeDurably(servePortFile(home), `${JSON.stringify({ port })}\n`).catch(debugLog.swallow('serve.port'));
}

export function createServeCommand(deps: ServeDeps): CliCommand {
  return {
    name: 'serve',
    summary: 'Serve the Airlock UI in your browser on 127.0.0.1 (the app without Electron).',
    usage: 'airlock serve [--port N] [--no-open] [--renderer-dir DIR]   (without --port: the port this data folder used last when it is free, else any free one)',
    async run(args: string[], io: CliIo): Promise<number> {
      const opts = parseServeArgs(args);
      const rendererDir = opts.rendererDir ?? (await defaultRendererDir(io.env));
      if (!(await hasBuiltRenderer(rendererDir))) {
        io.stderr.write(`airlock serve: no built UI in ${rendererDir}; run 'npm run build' (or 'npm start', which builds it) first\n`);
        return ExitCode.unavailable;
      }
      // One context for the command line: the services and the remembered port share its data folder.
      return withApp(io, async (app) => {
        // Listen for signals before anything is started: a Ctrl+C during startup must still clean up.
        const stop = deps.untilStopped();
        let host: HostServer | undefined;
        let services: AirlockServices | undefined;
        try {
          services = await deps.createServices(io.env, app);
          // `npm start` serves through us when Electron cannot start: name what the user actually ran.
          const launchCommand = io.env.npm_lifecycle_event === 'start' ? 'npm start' : 'airlock serve';
          const start = (port: number) => startHostServer({ router: createApiRouter(services as AirlockServices), rendererDir, port, launchCommand, ...(services?.onDidTerminalOutput ? { terminalOutput: services.onDidTerminalOutput } : {}) });
          const home = app.home;
          let note = '';
          const last =
            opts.port === undefined
              ? await lastServePort(home).catch((err: unknown) => {
                  if (!(err instanceof AirlockError) || err.kind !== 'INVALID_INPUT') throw err;
                  note = `${err.message}\n`;
                  return undefined;
                })
              : undefined;
          if (last !== undefined) {
            host = await start(last).catch((err: NodeJS.ErrnoException) => {
              if (err.code !== 'EADDRINUSE' && err.code !== 'EACCES') throw err;
              note = `Port ${last}, used last time, is taken; serving on another one (choose with --port N).\n`;
              return undefined;
            });
            if (host) note = `Same port as last time (${last}, kept for this data folder), with a new token: reload an open tab from the address below.\n`;
          }
          host ??= await start(opts.port ?? 0);
          if (opts.port === undefined) await saveServePort(home, host.port);
          io.stdout.write(`Airlock is running at ${host.url}\n${note}Open that URL (it carries this session's token). Ctrl+C stops it.\n`);
          deps.onListening?.(host);
          if (opts.open) (deps.openBrowser ?? ((url: string) => openInBrowser(url, io.env)))(host.url);
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
      });
    },
  };
}

/** `airlock serve` with the real core. */
export const serveCommand: CliCommand = createServeCommand({ createServices: createCoreServices, untilStopped: () => untilSignal() });
