import { AirlockError } from '../../../contracts/errors';
import { aptPreset } from './apt-preset';
import { cargoPreset } from './cargo-preset';
import { goPreset } from './go-preset';
import { npmPreset } from './npm-preset';
import { pipPreset } from './pip-preset';
import { PRESET_NAMES, resolveCtx, type Ctx, type Preset, type PresetContext, type PresetName } from './preset-context';

/**
 * Network presets for package managers, one file per tool, each derived from this machine's own
 * configuration of that tool (preset-context.ts says the rules all of them keep).
 */
export { execTool, PRESET_NAMES, type Preset, type PresetContext, type PresetName, type ToolRunner } from './preset-context';

const DERIVERS: Record<PresetName, (ctx: Ctx) => Promise<Preset>> = {
  npm: npmPreset,
  pip: pipPreset,
  cargo: cargoPreset,
  go: goPreset,
  apt: aptPreset,
};

/** Derives one preset from the host's configuration of that tool. */
export async function derivePreset(name: PresetName, context: PresetContext): Promise<Preset> {
  const derive = DERIVERS[name];
  if (!derive) {
    throw new AirlockError('INVALID_INPUT', `unknown network preset "${String(name)}"; choose one of ${PRESET_NAMES.join(', ')}`);
  }
  return derive(resolveCtx(context));
}

/** Derives several presets (in parallel). */
export function derivePresets(names: readonly PresetName[], context: PresetContext): Promise<Preset[]> {
  return Promise.all([...new Set(names)].map((n) => derivePreset(n, context)));
}
