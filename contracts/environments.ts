import { z } from 'zod';

/**
 * Project environments (docs/architecture.md §16): which environment a run uses, and what its record
 * says about it. The choice is written `auto`, `airlock`, `devcontainer[:PATH]` or `image:REF`.
 */
export const EnvironmentChoiceText = z
  .string()
  .trim()
  .max(600)
  .regex(/^(auto|airlock|devcontainer(:.+)?|image:.+)$/, 'use auto, airlock, devcontainer, devcontainer:PATH or image:REF');

/** A host variable name allowed into `${localEnv:NAME}`, by explicit choice. */
export const LocalEnvName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,100}$/, 'a variable name (letters, digits, _)');

/** An option of the project's configuration that Airlock did not apply, and why. */
export const NotAppliedOption = z.object({ field: z.string().max(200), reason: z.string().max(1000) });
export type NotAppliedOption = z.infer<typeof NotAppliedOption>;

/** Whether a run started from a prepared environment, on the run record. */
export const RunPrepared = z.object({
  /** `reused`: setup was skipped; `created`: setup ran and its state was kept; `failed`: setup ran, keeping its state failed (why). */
  status: z.enum(['reused', 'created', 'failed', 'not-kept']),
  key: z.string().max(100),
  image: z.string().max(200).optional(),
  reason: z.string().max(1000).optional(),
});
export type RunPrepared = z.infer<typeof RunPrepared>;

/** What the run record says about the environment that ran. */
export const RunEnvironment = z.object({
  /** `airlock`, `image:REF` or `devcontainer:PATH`. */
  name: z.string().max(700),
  kind: z.enum(['airlock', 'image', 'devcontainer']),
  /** The derived image that ran (tag and engine id), and the user's image it was made from. */
  image: z.string().max(500).optional(),
  imageId: z.string().max(200).optional(),
  baseImage: z.string().max(500).optional(),
  baseImageId: z.string().max(200).optional(),
  /** The image's own default user; the sandbox runs as uid 1000 whatever it says. */
  imageUser: z.string().max(200).optional(),
  notApplied: z.array(NotAppliedOption).max(200),
  /** Host variables allowed into `${localEnv:…}` by name. */
  localEnvUsed: z.array(z.string()).max(50).optional(),
  /** Files of the build context that stayed on the host (credential-looking). */
  contextExcluded: z.array(z.string()).max(10_000).optional(),
  /** The setup phase's prepared environment: reused (setup skipped) or made by this run. */
  prepared: RunPrepared.optional(),
  /** A compose devcontainer's other services, run as sidecars on the run's internal network. */
  sidecars: z.array(z.object({ service: z.string().max(100), image: z.string().max(500) })).max(50).optional(),
  /** `forwardPorts`, offered as the run's preview ports. */
  forwardPorts: z.array(z.number().int().min(1).max(65535)).max(100).optional(),
  /** `auto` found a devcontainer it could not use and ran Airlock's own image: which one, and why (one line). */
  fallback: z.object({ config: z.string().max(1000), reason: z.string().max(1000) }).optional(),
});
export type RunEnvironment = z.infer<typeof RunEnvironment>;

/** One prepared environment (docs/architecture.md §16): what `airlock env list` and Settings show. */
export const PreparedEnvironmentInfo = z.object({
  key: z.string().max(100),
  /** `airlock-prepared:<key>` and the engine's id. */
  image: z.string().max(200),
  imageId: z.string().max(200),
  /** The project folder and devcontainer it was prepared for. */
  project: z.string().max(4096),
  config: z.string().max(1000),
  baseImageId: z.string().max(200),
  /** The manifests and lockfiles among its inputs. */
  files: z.array(z.string().max(1000)).max(100),
  sizeBytes: z.number().nonnegative(),
  createdAt: z.string(),
  lastUsedAt: z.string().optional(),
});
export type PreparedEnvironmentInfo = z.infer<typeof PreparedEnvironmentInfo>;

/** A project base kept on the engine (docs/architecture.md §11, "A project's last copy"): what a later run copies only the difference to. */
export const ProjectBaseInfo = z.object({
  project: z.string().max(4096),
  /** The engine volume that holds it. */
  volume: z.string().max(200),
  files: z.number().int().nonnegative(),
  /** The project's bytes in it (the files' sizes). */
  sizeBytes: z.number().nonnegative(),
  createdAt: z.string(),
  /** False when the project folder is gone: `airlock env prune --older-than` removes it. */
  projectExists: z.boolean(),
});
export type ProjectBaseInfo = z.infer<typeof ProjectBaseInfo>;

/** What `airlock env prune` removed, and what the engine kept (in use by a sandbox). */
export const PruneResult = z.object({
  removed: z.array(z.object({ key: z.string(), sizeBytes: z.number().nonnegative() })),
  kept: z.array(z.object({ key: z.string(), reason: z.string() })),
  freedBytes: z.number().nonnegative(),
});
export type PruneResult = z.infer<typeof PruneResult>;


/** One environment a project can run in, as the New run form offers it. */
export const EnvironmentOption = z.object({
  /** What `--environment` and the run's `environment` field take: `airlock`, `devcontainer:PATH`, `image:REF`. */
  choice: z.string().max(700),
  label: z.string().max(700),
  kind: z.enum(['airlock', 'image', 'devcontainer']),
  /** A devcontainer's accepted state for this project (`untrusted`: the run asks first). */
  trust: z.enum(['trusted', 'untrusted', 'changed']).optional(),
  /** What this environment would not apply, and why (a devcontainer's). */
  notApplied: z.array(NotAppliedOption).max(200),
  /** Why it cannot be used as it is (a malformed config, compose, features…). */
  problem: z.string().max(2000).optional(),
});
export type EnvironmentOption = z.infer<typeof EnvironmentOption>;

/** The environments a project has, and which one its run would use by default. */
export const ProjectEnvironments = z.object({
  options: z.array(EnvironmentOption).max(100),
  /** The choice `auto` (or the settings default) resolves to for this project. */
  selected: z.string().max(700),
  /** Why the default could not be decided by itself (several named devcontainers: the user picks). */
  needsChoice: z.string().max(1000).optional(),
});
export type ProjectEnvironments = z.infer<typeof ProjectEnvironments>;

export const environmentsContracts = {
  /** The environments found in a project (the New run form's picker). */
  'environments:find': { input: z.strictObject({ projectDir: z.string().min(1).max(4096), environment: EnvironmentChoiceText.optional() }), output: ProjectEnvironments },
  /**
   * What a run on the project would build and run, read on the host only (`airlock env plan`, worded for
   * the app): the image or build, features, each setup command with its user and folder, variables,
   * ports, sidecars and what is not applied. Shown before the user accepts a devcontainer.
   */
  'environments:plan': { input: z.strictObject({ projectDir: z.string().min(1).max(4096), environment: EnvironmentChoiceText.optional() }), output: z.object({ text: z.string().max(1_000_000) }) },
  /** This installation's prepared environments (`airlock env list`, Settings). */
  'environments:list': { input: z.strictObject({}).default({}), output: z.object({ environments: z.array(PreparedEnvironmentInfo), totalBytes: z.number().nonnegative(), bases: z.array(ProjectBaseInfo).max(10_000).default([]) }) },
  /** Removes prepared environments: all, or those unused for longer than `olderThan` (`airlock env prune`). */
  'environments:prune': { input: z.strictObject({ olderThan: z.string().trim().max(20).optional() }).default({}), output: PruneResult },
} as const;
