import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { AirlockError } from '../../contracts/errors';
import { Settings } from '../../contracts/settings';
import { Emitter, type Event } from '../common/disposable';

export const DEFAULT_SETTINGS: Settings = {
  theme: 'system',
  notifications: true,
  transcripts: false,
  defaultAgent: 'builtin',
  defaultApproval: 'auto',
  defaultIsolation: 'container',
  defaultNetwork: 'none',
  defaultTimeoutSec: 1800,
  defaultAllowlist: [],
};

/**
 * Parses `settings.json` (the saved fields over the defaults). A damaged file is an error naming the
 * file and the field, never a silent reset to defaults: saving over it would lose every other setting.
 */
export function parseSettingsFile(file: string, text: string): Settings {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new AirlockError('INVALID_INPUT', `${file} is not valid JSON (${(err as Error).message}); fix it or delete it to start from the default settings.`);
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new AirlockError('INVALID_INPUT', `${file} does not hold an object of settings; fix it or delete it to start from the default settings.`);
  const parsed = Settings.safeParse({ ...DEFAULT_SETTINGS, ...raw });
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = issue?.path.join('.') || 'settings';
    throw new AirlockError('INVALID_INPUT', `${file}: field ${field}: ${issue?.message ?? 'invalid'}; fix that field or delete the file to start from the default settings.`);
  }
  return parsed.data;
}

/** Settings in `<home>/settings.json` (no secrets); written atomically. */
export class SettingsStore {
  readonly file: string;
  private readonly changed = new Emitter<Settings>();
  readonly onDidChange: Event<Settings> = this.changed.event;

  constructor(home: string) {
    this.file = path.join(home, 'settings.json');
  }

  async get(): Promise<Settings> {
    let text: string;
    try {
      text = await readFile(this.file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { ...DEFAULT_SETTINGS };
      throw err;
    }
    return parseSettingsFile(this.file, text);
  }

  async update(patch: Partial<Settings>): Promise<Settings> {
    const next = { ...(await this.get()), ...patch };
    await mkdir(path.dirname(this.file), { recursive: true });
    const tmp = `${this.file}.${process.pid}.tmp`;
    await writeFile(tmp, JSON.stringify(next, null, 2));
    await rename(tmp, this.file);
    this.changed.fire(next);
    return next;
  }
}
