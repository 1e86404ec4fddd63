import path from 'node:path';
import type { EnvironmentOption, ProjectEnvironments } from '../../contracts/environments';
import { AirlockError } from '../../contracts/errors';
import { loadDevcontainer, type EnvironmentHost } from './devcontainer-config';
import { findDevcontainerConfigs } from './devcontainer-files';
import { formatEnvironmentChoice, parseEnvironmentChoice, resolveEnvironment } from './environment-choice';
import { EnvironmentTrust } from './environment-trust';

/**
 * What the New run form offers (docs/architecture.md §16, "Choosing"): Airlock's own image, each of
 * the project's devcontainer configurations with what it would not apply and whether it is
 * accepted, and the image the choice names. `selected` is what the choice (`auto`, or the settings
 * default) resolves to; with several named configurations and no choice, the user picks.
 */
export async function projectEnvironments({ home, env }: EnvironmentHost, projectDir: string, choiceText: string | undefined): Promise<ProjectEnvironments> {
  const root = path.resolve(projectDir);
  const trust = new EnvironmentTrust(root, home);
  const options: EnvironmentOption[] = [{ choice: 'airlock', label: "Airlock's own image", kind: 'airlock', notApplied: [] }];
  for (const configPath of await findDevcontainerConfigs(root)) {
    const choice = `devcontainer:${configPath}`;
    try {
      const cfg = await loadDevcontainer(root, configPath, { env });
      // Published features are fetched when a run or the plan checks the configuration, not when listing.
      const problem: string | undefined = undefined;
      const state = await trust.state(cfg);
      options.push({ choice, label: `devcontainer: ${configPath}`, kind: 'devcontainer', trust: state === 'new' ? 'untrusted' : state, notApplied: cfg.notApplied, ...(problem ? { problem } : {}) });
    } catch (err) {
      options.push({ choice, label: `devcontainer: ${configPath}`, kind: 'devcontainer', notApplied: [], problem: err instanceof Error ? err.message : String(err) });
    }
  }
  const choice = parseEnvironmentChoice(choiceText);
  if (choice.kind === 'image') options.push({ choice: formatEnvironmentChoice(choice), label: `image: ${choice.ref}`, kind: 'image', notApplied: [] });
  try {
    const resolved = await resolveEnvironment(root, choice, { env });
    const selected = resolved.kind === 'devcontainer' ? `devcontainer:${resolved.config.configPath}` : resolved.kind === 'image' ? `image:${resolved.ref}` : 'airlock';
    return { options, selected };
  } catch (err) {
    // Several named configurations (or a named one that is gone): no default, the user picks.
    if (err instanceof AirlockError && (err.kind === 'INVALID_INPUT' || err.kind === 'NOT_FOUND')) return { options, selected: '', needsChoice: err.message };
    throw err;
  }
}
