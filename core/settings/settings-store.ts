import path from 'node:path';
import { AirlockError } from '../../contracts/errors';
import { Settings } from '../../contracts/settings';
import { Emitter, type Event } from '../common/disposable';
import { StoredFile } from '../common/stored-file';

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

/** Settings in `<home>/settings.json` (no secrets); updates serialised and written atomically (StoredFile). */
export class SettingsStore {
  readonly file: string;
  private readonly stored: StoredFile<Settings>;
  private readonly changed = new Emitter<Settings>();
  readonly onDidChange: Event<Settings> = this.changed.event;

  constructor(home: string) {
    this.file = path.join(home, 'settings.json');
    this.stored = new StoredFile(this.file, { parse: parseSettingsFile, empty: () => ({ ...DEFAULT_SETTINGS }) });
  }

  get(): Promise<Settings> {
    return this.stored.read();
  }

  /** Saves `patch` over the stored settings; two updates at once both land. */
  async update(patch: Partial<Settings>): Promise<Settings> {
    const next = await this.stored.update((current) => ({ ...current, ...patch }));
    this.changed.fire(next);
    return next;
  }
}
