/**
 * What a run record says about its environment, in the words the run view and its report use
 * (docs/architecture.md §16, "Choosing"): which environment ran, where it came from, whether setup ran or
 * a prepared environment was reused, and — the case a user must never miss — a devcontainer that `auto`
 * found but did not use (not accepted, changed since accepted, or not usable with the agent chosen).
 */
import type { RunEnvironment } from '../../../contracts';

export interface EnvironmentSummary {
  /** One line: "devcontainer .devcontainer/devcontainer.json (node:20)", "Airlock's own image". */
  title: string;
  /** The project's devcontainer that was found and not used, and why. */
  fallback?: { config: string; reason: string };
  /** Setup: skipped (prepared environment reused), ran and kept, ran and not kept. */
  prepared?: string;
}

export function summarizeEnvironment(env: RunEnvironment | undefined): EnvironmentSummary {
  if (!env) return { title: "Airlock's own image" };
  const from = env.baseImage ? ` (from ${env.baseImage})` : '';
  const title = env.kind === 'airlock' ? "Airlock's own image" : env.kind === 'image' ? `the image ${env.name.replace(/^image:/, '')}${from}` : `devcontainer ${env.name.replace(/^devcontainer:/, '')}${from}`;
  // Airlock's image with a not-applied entry is `auto` having skipped the project's devcontainer (core/environment/run-environment.ts).
  const skipped = env.fallback ? { field: env.fallback.config, reason: env.fallback.reason } : env.kind === 'airlock' ? env.notApplied[0] : undefined;
  const prepared = env.prepared && {
    reused: 'setup skipped: a prepared environment was reused',
    created: 'setup ran; its result was kept for the next run',
    failed: `setup ran; keeping its result failed${env.prepared.reason ? ` (${env.prepared.reason})` : ''}`,
    'not-kept': `setup ran; its result was not kept${env.prepared.reason ? ` (${env.prepared.reason})` : ''}`,
  }[env.prepared.status];
  // The core's reason starts by saying what the title and notice already say.
  const reason = skipped?.reason.replace(/^not used, Airlock's own image ran instead: /, '');
  return { title, ...(skipped ? { fallback: { config: skipped.field, reason: reason! } } : {}), ...(prepared ? { prepared } : {}) };
}
