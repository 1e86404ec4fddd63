import { AirlockError } from '../../contracts/errors';

/**
 * `auto` never fails because of a devcontainer the user did not accept (docs/architecture.md §16,
 * "Choosing"): a configuration it found by itself that cannot be read, built or used keeps the run on
 * Airlock's own image, and the run says why in one line. An explicit `devcontainer[:PATH]`, or a
 * configuration the user is accepting or has accepted, still fails with the full error.
 */

/** The longest reason a fallback line carries (the full error is one `--environment devcontainer` away). */
const MAX_REASON = 400;

/** The configuration `auto` would have used: the first top-level one, else the only or first named one. */
export function autoCandidate(found: readonly string[]): string {
  return found.find((f) => f === '.devcontainer/devcontainer.json' || f === '.devcontainer.json') ?? (found.length === 1 ? (found[0] as string) : found.length ? '.devcontainer/*/devcontainer.json' : 'devcontainer');
}

/** The one line a run shows when `auto` keeps Airlock's image: which configuration, and why. */
export function fallbackReason(why: string): string {
  const line = why.replace(/\s*\n\s*/g, ' ').replace(/, or choose --environment airlock\.$/, '.').trim();
  const short = line.length > MAX_REASON ? `${line.slice(0, MAX_REASON - 1)}…` : line;
  return `not used, Airlock's own image ran instead: ${short}`;
}

/** Whether `auto` may fall back on this error: the project's own configuration was at fault, not Airlock. */
export function isConfigurationError(err: unknown): err is AirlockError {
  return err instanceof AirlockError && (err.kind === 'INVALID_INPUT' || err.kind === 'NOT_FOUND' || err.kind === 'FORBIDDEN');
}
