import { createAppContext, type AppContext } from '../app-context';
import type { CliIo } from './command';

/**
 * Runs `fn` with the command's shared pieces: the ones `main` made for this command line, else ones
 * made from `io.env` and closed afterwards. Commands never build a vault, catalog or store of their own.
 */
export async function withApp<T>(io: CliIo, fn: (app: AppContext) => Promise<T>): Promise<T> {
  if (io.app) return fn(io.app);
  const app = createAppContext({ env: io.env });
  try {
    return await fn(app);
  } finally {
    await app.close();
  }
}
