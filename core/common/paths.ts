import os from 'node:os';
import path from 'node:path';

/**
 * Airlock's data directory: run history, audit logs, settings (never keys).
 * `AIRLOCK_HOME` overrides the per-OS default.
 */
export function airlockHome(env: NodeJS.ProcessEnv = process.env): string {
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
