// A module of its own so the CLI's argument check (`--engine`) does not load the engine resolver.

/** The engines Airlock knows by name. Both speak the Docker Engine API. */
export type EngineKind = 'docker' | 'podman';

/** The user's choice (`--engine`, the `engine` setting, `AIRLOCK_ENGINE`): `auto` takes the first engine found. */
export type EngineChoice = 'auto' | EngineKind;
export const ENGINE_CHOICES: readonly EngineChoice[] = ['auto', 'docker', 'podman'];
