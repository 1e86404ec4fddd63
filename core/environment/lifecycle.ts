import { AirlockError } from '../../contracts/errors';

/** Devcontainer lifecycle hooks (docs/architecture.md §16): shared by devcontainer.json and devcontainer-feature.json. */

/** One command of a lifecycle hook: a shell line runs under `/bin/sh -c`, an array as argv. */
export interface LifecycleStep {
  /** The key in the object form (the spec runs those in parallel). */
  name?: string;
  argv: string[];
}

/** In the spec's order; `postAttachCommand` runs last, as when a tool attaches (the agent does, every run). */
export const LIFECYCLE_HOOKS = ['onCreateCommand', 'updateContentCommand', 'postCreateCommand', 'postStartCommand', 'postAttachCommand'] as const;
/** Hooks for processes and attaching, run at every start: a prepared environment does not replace them. */
export const EVERY_START_HOOKS: readonly LifecycleHook[] = ['postStartCommand', 'postAttachCommand'];
export type LifecycleHook = (typeof LIFECYCLE_HOOKS)[number];

/** A lifecycle hook's value as steps (string: `sh -c`; array: argv; object: named, parallel). */
export function lifecycleSteps(v: unknown, file: string, hook: string): LifecycleStep[] | undefined {
  if (v === undefined || v === null) return undefined;
  const one = (x: unknown, name?: string): LifecycleStep => {
    if (typeof x === 'string' && x.trim()) return { ...(name ? { name } : {}), argv: ['/bin/sh', '-c', x] };
    if (Array.isArray(x) && x.length > 0 && x.every((a) => typeof a === 'string')) return { ...(name ? { name } : {}), argv: x };
    throw new AirlockError('INVALID_INPUT', `${file}: ${hook}${name ? `.${name}` : ''} must be a command line, an array of arguments, or an object of those. Fix the file, or choose another environment (--environment airlock).`, { field: 'environment' });
  };
  if (typeof v === 'object' && !Array.isArray(v)) return Object.entries(v).map(([name, x]) => one(x, name));
  return [one(v)];
}

