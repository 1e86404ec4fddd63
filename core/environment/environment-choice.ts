import { AirlockError } from '../../contracts/errors';
import { findDevcontainerConfigs, locateDevcontainerConfig } from './devcontainer-files';
import { loadDevcontainer, type DevcontainerEnvironment, type ResolveOptions } from './devcontainer-config';

/**
 * Which environment a run uses (docs/architecture.md §16): `auto` (the project's devcontainer when it
 * has one, else Airlock's image), `airlock`, `devcontainer[:PATH]`, or `image:REF`.
 */
export type EnvironmentChoice = { kind: 'auto' } | { kind: 'airlock' } | { kind: 'devcontainer'; path?: string } | { kind: 'image'; ref: string };

/** Image references as engines accept them (name[:tag][@digest], optional registry host). */
const IMAGE_REF = /^[a-z0-9][a-z0-9._\-/:@]*$/i;

export function parseEnvironmentChoice(value: string | undefined): EnvironmentChoice {
  const v = (value ?? '').trim();
  if (!v || v === 'auto') return { kind: 'auto' };
  if (v === 'airlock') return { kind: 'airlock' };
  if (v === 'devcontainer') return { kind: 'devcontainer' };
  if (v.startsWith('devcontainer:')) {
    const p = v.slice('devcontainer:'.length).trim();
    return p ? { kind: 'devcontainer', path: p } : { kind: 'devcontainer' };
  }
  if (v.startsWith('image:')) {
    const ref = v.slice('image:'.length).trim();
    if (!IMAGE_REF.test(ref) || ref.length > 500) throw new AirlockError('INVALID_INPUT', `'${ref}' is not an image reference; write it as --environment image:NAME[:TAG], e.g. image:golang:1.22`, { field: 'environment' });
    return { kind: 'image', ref };
  }
  throw new AirlockError('INVALID_INPUT', `unknown environment '${v}': use airlock, devcontainer, devcontainer:PATH or image:REF`, { field: 'environment' });
}

export function formatEnvironmentChoice(c: EnvironmentChoice): string {
  if (c.kind === 'devcontainer') return c.path ? `devcontainer:${c.path}` : 'devcontainer';
  if (c.kind === 'image') return `image:${c.ref}`;
  return c.kind;
}

const TOP_LEVEL: readonly string[] = ['.devcontainer/devcontainer.json', '.devcontainer.json'];

export type ResolvedEnvironment =
  | { kind: 'airlock'; found: string[] }
  | { kind: 'image'; ref: string; found: string[] }
  | { kind: 'devcontainer'; config: DevcontainerEnvironment; found: string[] };

/**
 * Resolves a choice for a project on the host: finds the devcontainer configurations and reads the
 * chosen one. `found` lists every configuration the project has, so the form and the CLI can offer them.
 */
export async function resolveEnvironment(projectDir: string, choice: EnvironmentChoice, opts: ResolveOptions): Promise<ResolvedEnvironment> {
  const found = await findDevcontainerConfigs(projectDir);
  if (choice.kind === 'airlock') return { kind: 'airlock', found };
  if (choice.kind === 'image') return { kind: 'image', ref: choice.ref, found };
  let configPath: string | undefined;
  if (choice.kind === 'devcontainer' && choice.path) {
    configPath = await locateDevcontainerConfig(projectDir, choice.path);
    if (!configPath) {
      const list = found.length ? ` It has: ${found.join(', ')}.` : ' It has none.';
      throw new AirlockError('NOT_FOUND', `No devcontainer configuration '${choice.path}' in the project.${list}`, { field: 'environment' });
    }
  } else {
    const top = found.filter((f) => TOP_LEVEL.includes(f));
    const named = found.filter((f) => !top.includes(f));
    configPath = top[0] ?? (named.length === 1 ? named[0] : undefined);
    if (!configPath && named.length > 1) {
      const names = named.map((f) => f.split('/')[1]);
      throw new AirlockError('INVALID_INPUT', `The project has ${named.length} devcontainer configurations (${names.join(', ')}); choose one, e.g. --environment devcontainer:${names[0]}`, { field: 'environment' });
    }
    if (!configPath) {
      if (choice.kind === 'devcontainer') throw new AirlockError('NOT_FOUND', 'The project has no devcontainer configuration (.devcontainer/devcontainer.json or .devcontainer.json). Add one, or choose --environment airlock.', { field: 'environment' });
      return { kind: 'airlock', found };
    }
  }
  return { kind: 'devcontainer', config: await loadDevcontainer(projectDir, configPath, opts), found };
}
