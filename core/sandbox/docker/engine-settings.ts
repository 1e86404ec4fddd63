import type { Settings } from '../../../contracts/settings';
import { engineChoiceFrom, type EngineSelection } from './engine-endpoint';

/** The engine the settings name (the environment's `AIRLOCK_ENGINE*` still wins in `connectEngine`). */
export function engineSelectionOf(env: NodeJS.ProcessEnv, s: Settings): EngineSelection {
  return { host: s.engineHost, allowInsecure: s.engineAllowInsecure, choice: engineChoiceFrom(env, s.engine ?? 'auto') };
}

/** What an engine connection is made from, to tell whether a settings change needs another one. */
export function engineSettingsKey(s: Settings): string {
  return JSON.stringify([s.engine ?? 'auto', s.engineHost?.trim() ?? '', s.engineAllowInsecure === true]);
}
