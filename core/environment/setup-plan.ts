import { access } from 'node:fs/promises';
import path from 'node:path';
import type { PresetName } from '../network/presets';
import { LIFECYCLE_HOOKS, type DevcontainerEnvironment, type LifecycleHook, type LifecycleStep } from './devcontainer-config';

/** The setup phase of a run (docs/architecture.md §16): the lifecycle hooks in order, and what they may reach. */
export interface SetupPlan {
  configPath: string;
  /** In order; an entry's steps run at once. `feature`: the commands of that feature's devcontainer-feature.json. */
  hooks: Array<{ hook: LifecycleHook; feature?: string; steps: LifecycleStep[] }>;
  /** Presets implied by the project's manifests and lockfiles (`preset:npm`, …). */
  presets: PresetName[];
  /** Which files implied them, for the record. */
  impliedBy: string[];
  /** The folder the commands run in (workspaceFolder mapped into the sandbox). */
  cwd: string;
}

/** Manifests and lockfiles, and the registry preset each implies. */
const MANIFESTS: Array<[string, PresetName]> = [
  ['package.json', 'npm'],
  ['package-lock.json', 'npm'],
  ['npm-shrinkwrap.json', 'npm'],
  ['yarn.lock', 'npm'],
  ['pnpm-lock.yaml', 'npm'],
  ['requirements.txt', 'pip'],
  ['requirements-dev.txt', 'pip'],
  ['pyproject.toml', 'pip'],
  ['Pipfile', 'pip'],
  ['Pipfile.lock', 'pip'],
  ['setup.py', 'pip'],
  ['poetry.lock', 'pip'],
  ['Cargo.toml', 'cargo'],
  ['Cargo.lock', 'cargo'],
  ['go.mod', 'go'],
  ['go.sum', 'go'],
];

/** The setup plan of a devcontainer, or undefined when it has no lifecycle commands. */
export async function setupPlan(projectDir: string, cfg: DevcontainerEnvironment): Promise<SetupPlan | undefined> {
  // Each feature's commands for a hook run before the configuration's own, in install order, one after another (as the reference runs them).
  const hooks = LIFECYCLE_HOOKS.flatMap((hook) => [
    ...(cfg.installed ?? []).flatMap((f) => (f.lifecycle[hook] ? [{ hook, feature: f.id, steps: f.lifecycle[hook] as LifecycleStep[] }] : [])),
    ...(cfg.lifecycle[hook] ? [{ hook, steps: cfg.lifecycle[hook] as LifecycleStep[] }] : []),
  ]);
  if (hooks.length === 0) return undefined;
  const presets = new Set<PresetName>();
  const impliedBy: string[] = [];
  for (const [file, preset] of MANIFESTS) {
    const found = await access(path.join(projectDir, file)).then(
      () => true,
      () => false,
    );
    if (!found) continue;
    presets.add(preset);
    impliedBy.push(file);
  }
  return { configPath: cfg.configPath, hooks, presets: [...presets], impliedBy, cwd: cfg.workFolder };
}
