import os from 'node:os';
import path from 'node:path';

/**
 * Airlock's data directory: run history, audit logs, settings (never keys).
 * `AIRLOCK_HOME` overrides the per-OS default. The roots (CLI entry, Electron main, tests) pass
 * their environment; everything below takes the home from the AppContext (docs/architecture.md §5).
 */
export function airlockHome(env: NodeJS.ProcessEnv): string {
  if (env.AIRLOCK_HOME) return path.resolve(env.AIRLOCK_HOME);
  const home = os.homedir();
  switch (process.platform) {
    case 'darwin':
      return path.join(home, 'Library', 'Application Support', 'Airlock');
    case 'win32':
      return path.join(env.APPDATA ?? path.join(home, 'AppData', 'Roaming'), 'Airlock');
    default:
      return path.join(env.XDG_DATA_HOME ?? path.join(home, '.local', 'share'), 'airlock');
  }
}
