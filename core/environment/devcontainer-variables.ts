/**
 * The devcontainer spec's `${…}` variables (docs/architecture.md §16). `${localEnv:NAME}` would copy
 * a host environment variable — often a secret — into the sandbox, so it resolves only for names the
 * user allowed by explicit choice; otherwise to its default (written in the file, not taken from the
 * host) or empty, and the reference is reported as not applied.
 */
export interface VariableContext {
  /** The project on the host. */
  localWorkspaceFolder: string;
  /** Where the project is inside the sandbox. */
  containerWorkspaceFolder: string;
  /** The host's environment, read only for `allowedLocalEnv` names. */
  env: NodeJS.ProcessEnv;
  allowedLocalEnv: readonly string[];
  /** A stable id for this project's environment. */
  devcontainerId: string;
  /** `${containerWorkspaceFolderBasename}`, when it is not the last part of `containerWorkspaceFolder`. */
  containerWorkspaceFolderBasename?: string;
}

/** What substitution left out: `${localEnv:NAME}` references that were not allowed. */
export interface Substitution {
  refusedLocalEnv: Set<string>;
}

const VARIABLE = /\$\{([A-Za-z]+)(?::([^}:]*))?(?::([^}]*))?\}/g;

export function substituteString(value: string, ctx: VariableContext, out: Substitution): string {
  return value.replace(VARIABLE, (whole, kind: string, arg: string | undefined, fallback: string | undefined) => {
    switch (kind) {
      case 'localWorkspaceFolder':
        return ctx.localWorkspaceFolder;
      case 'containerWorkspaceFolder':
        return ctx.containerWorkspaceFolder;
      case 'localWorkspaceFolderBasename':
        return basename(ctx.localWorkspaceFolder);
      case 'containerWorkspaceFolderBasename':
        return ctx.containerWorkspaceFolderBasename ?? basename(ctx.containerWorkspaceFolder);
      case 'devcontainerId':
        return ctx.devcontainerId;
      case 'localEnv':
      case 'env': {
        if (!arg) return whole;
        if (ctx.allowedLocalEnv.includes(arg)) return ctx.env[arg] ?? fallback ?? '';
        out.refusedLocalEnv.add(arg);
        return fallback ?? '';
      }
      default:
        // `${containerEnv:NAME}` is the container's own environment (the image's, then containerEnv):
        // kept as written here, resolved when the run knows the image (resolveContainerEnv), as the reference does.
        // Unknown variables stay as written (the spec's behaviour).
        return whole;
    }
  });
}

const CONTAINER_ENV = /\$\{containerEnv:([^}:]*)(?::([^}]*))?\}/g;

/**
 * Resolves `${containerEnv:NAME[:default]}` against the container's environment (docs/architecture.md §16):
 * `"PATH": "${containerEnv:PATH}:/x"` extends the image's PATH, as the reference does.
 */
export function resolveContainerEnv(value: string, env: Readonly<Record<string, string>>): string {
  return value.replace(CONTAINER_ENV, (_whole, name: string, fallback: string | undefined) => env[name] ?? fallback ?? '');
}

/**
 * The environment a devcontainer's commands see: the image's, then containerEnv, then remoteEnv, each
 * value's `${containerEnv:…}` resolved against what came before it.
 */
export function containerEnvironment(base: Readonly<Record<string, string>>, containerEnv: Readonly<Record<string, string>>, remoteEnv: Readonly<Record<string, string>>): Record<string, string> {
  const env: Record<string, string> = { ...base };
  const resolved = Object.fromEntries(Object.entries(containerEnv).map(([k, v]) => [k, resolveContainerEnv(v, base)]));
  Object.assign(env, resolved);
  const container = { ...env };
  for (const [k, v] of Object.entries(remoteEnv)) env[k] = resolveContainerEnv(v, container);
  return env;
}

/** Substitutes in every string of a JSON value. */
export function substituteDeep<T>(value: T, ctx: VariableContext, out: Substitution): T {
  if (typeof value === 'string') return substituteString(value, ctx, out) as T;
  if (Array.isArray(value)) return value.map((v) => substituteDeep(v, ctx, out)) as T;
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, substituteDeep(v, ctx, out)])) as T;
  }
  return value;
}

function basename(p: string): string {
  const parts = p.replace(/\\/g, '/').split('/').filter(Boolean);
  return parts[parts.length - 1] ?? '';
}
