import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';

const FILE = 'installation-id';

/**
 * A random id for this Airlock home, made on first use and kept in `<home>/installation-id`. Engine
 * resources carry it (label `airlock.installation`), so on an engine shared by several people's
 * machines a reaper only ever touches its own installation's sandboxes: host name and pid alone
 * cannot tell two machines apart (docs/architecture.md §13).
 */
export async function installationId(home: string): Promise<string> {
  const file = path.join(home, FILE);
  const read = async () => (await readFile(file, 'utf8')).trim();
  try {
    const id = await read();
    if (/^[0-9a-f]{32}$/.test(id)) return id;
  } catch {
    // Not made yet.
  }
  await mkdir(home, { recursive: true, mode: 0o700 });
  const id = randomBytes(16).toString('hex');
  try {
    await writeFile(file, `${id}\n`, { flag: 'wx', mode: 0o600 });
    return id;
  } catch (err) {
    // Another process made it first (or a bad one is there: replace it).
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') {
      const existing = await read();
      if (/^[0-9a-f]{32}$/.test(existing)) return existing;
      await writeFile(file, `${id}\n`, { mode: 0o600 });
      return id;
    }
    throw err;
  }
}
