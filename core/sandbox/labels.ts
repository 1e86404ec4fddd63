/** Labels on every engine resource Airlock creates; wipe, list and the reaper find things by them. */
export const LABEL_RUN = 'airlock.run';
export const LABEL_KIND = 'airlock.kind';
/** Which per-run volume this is (`workspace` or `state`). */
export const LABEL_VOLUME = 'airlock.volume';
/** `<hostname>:<pid>` of the creating process, so a reaper in another process leaves live ones alone. */
export const LABEL_OWNER = 'airlock.owner';
/**
 * The random id of the Airlock installation (home) that made it: on a shared remote engine the
 * reaper takes only its own installation's resources, whatever host name and pid say.
 */
export const LABEL_INSTALLATION = 'airlock.installation';
/** On a derived image (core/environment/derived-image.ts): the id of the project's image it was made from. */
export const LABEL_DERIVED_FROM = 'airlock.derived-from';
/** Set on sandboxes started ahead of demand by a warm pool. */
export const LABEL_POOL = 'airlock.pool';

export type ResourceKind = 'sandbox' | 'sidecar' | 'volume' | 'network' | 'image';

export function runLabels(runId: string, kind: ResourceKind): Record<string, string> {
  return { [LABEL_RUN]: runId, [LABEL_KIND]: kind };
}

/** A run id is used in container and volume names: keep it to characters every engine accepts. */
export function assertSafeRunId(runId: string): void {
  if (!/^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,100}$/.test(runId)) {
    throw new Error(`run id '${runId}' must be letters, digits, '.', '_' or '-'`);
  }
}
/**
 * On Airlock's sandbox image: how many CA certificates of the host's beyond the public ones it carries
 * (core/sandbox/image.ts `hostExtraCaCerts`); a devcontainer build adds them to its own steps when
 * there are any (core/environment/build-ca.ts).
 */
export const LABEL_HOST_CA = 'airlock.host-ca';
