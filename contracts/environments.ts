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
  /** A compose devcontainer's other services, run as sidecars on the run's internal network. */
  sidecars: z.array(z.object({ service: z.string().max(100), image: z.string().max(500) })).max(50).optional(),
  /** `forwardPorts`, offered as the run's preview ports. */
  forwardPorts: z.array(z.number().int().min(1).max(65535)).max(100).optional(),
});
export type RunEnvironment = z.infer<typeof RunEnvironment>;
