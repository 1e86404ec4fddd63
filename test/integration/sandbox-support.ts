import { newRunId } from '../../contracts/ids';
import { connectEngine, type Engine } from '../../core/sandbox/docker/engine';
import { ensureSandboxImage } from '../../core/sandbox/image';
import { podmanTestSocket, type Prerequisite } from '../support/prerequisites';

let shared: Promise<Engine> | undefined;
/** The one engine handle tests give the drivers and image builds they make (the app passes the one its settings chose). */
export function testEngine(): Promise<Engine> {
  shared ??= connectEngine(process.env);
  return shared;
}

/** A fresh run id in the format RunService uses. */
export function testRunId(): string {
  return newRunId();
}

const images = new Map<string, Promise<string>>();

/**
 * The Airlock sandbox image, built once per test process and engine (cached by content hash across
 * runs). Podman builds its own copy through its API: engines do not share image stores.
 */
export function sandboxImage(engine?: Engine): Promise<string> {
  const key = engine?.endpoint.display ?? 'default';
  let image = images.get(key);
  if (!image) {
    image = ensureSandboxImage({ env: process.env,
      engine: engine ?? testEngine(),
      onProgress: (p) => {
        if (p.phase === 'build' && p.message.startsWith('step ')) console.log(`[image ${key}] ${p.message}`);
      },
    }).then((r) => r.ref);
    images.set(key, image);
  }
  return image;
}

/**
 * The ways a container sandbox runs, for tests parametrised over them: runc on the Docker engine
 * (the default), gVisor's runsc on the Docker engine (`--isolation gvisor`), and runc on Podman's
 * Docker-compatible API (`AIRLOCK_TEST_PODMAN_SOCKET`, else the rootful socket).
 */
export interface SandboxVariant {
  name: 'runc' | 'gvisor' | 'podman' | 'runc-derived' | 'gvisor-derived';
  prerequisite: Prerequisite;
  isolation: 'container' | 'gvisor';
  /** The engine to use; undefined: the default resolution (the Docker engine here). */
  engine(): Promise<Engine | undefined>;
  /** The image; undefined: Airlock's own sandbox image. */
  image?(engine: Engine | undefined): Promise<string>;
}

/** A project's Node-less image with Airlock's runtime added (docs/architecture.md §16). */
async function derivedNodeless(engine: Engine | undefined): Promise<string> {
  const { nodelessImage, derivedImage } = await import('../support/environment-images');
  return derivedImage(await nodelessImage(engine), engine);
}

export const SANDBOX_VARIANTS: readonly SandboxVariant[] = [
  { name: 'runc', prerequisite: 'docker', isolation: 'container', engine: async () => undefined },
  { name: 'gvisor', prerequisite: 'runsc', isolation: 'gvisor', engine: async () => undefined },
  { name: 'podman', prerequisite: 'podman', isolation: 'container', engine: () => connectEngine(process.env, { host: `unix://${podmanTestSocket()}` }) },
];

/** The same, on the derived sandbox of a project image that has no Node (runc and gVisor). */
export const DERIVED_SANDBOX_VARIANTS: readonly SandboxVariant[] = [
  { name: 'runc-derived', prerequisite: 'docker', isolation: 'container', engine: async () => undefined, image: derivedNodeless },
  { name: 'gvisor-derived', prerequisite: 'runsc', isolation: 'gvisor', engine: async () => undefined, image: derivedNodeless },
];

/** One variant by name. */
export function sandboxVariant(name: SandboxVariant['name']): SandboxVariant {
  return SANDBOX_VARIANTS.find((v) => v.name === name) as SandboxVariant;
}
