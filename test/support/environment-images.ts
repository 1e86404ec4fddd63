import { createHash } from 'node:crypto';
import { AirlockError } from '../../contracts/errors';
import { deriveSandboxImage } from '../../core/environment/derived-image';
import { engineBuild, imageId } from '../../core/environment/engine-build';
import { connectEngine, type Engine } from '../../core/sandbox/docker/engine';
import { buildContextTar } from '../../core/sandbox/image';
import { sandboxImage } from '../integration/sandbox-support';

/**
 * A project image with no Node, as a Go project's devcontainer would have (docs/architecture.md
 * §16): the locally seeded Debian plus Go, and the curl and python3 the hardening suite probes
 * with. Projects in the tests use this very Dockerfile, so Airlock's own build of their devcontainer
 * hits the engine's layer cache: it is built once per machine (and once per CI run).
 */
export const NODELESS_DOCKERFILE = `FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends golang-go curl python3 ca-certificates && rm -rf /var/lib/apt/lists/*
`;

const built = new Map<string, Promise<string>>();

function once(key: string, make: () => Promise<string>): Promise<string> {
  let p = built.get(key);
  if (!p) {
    p = make();
    built.set(key, p);
    p.catch(() => built.delete(key));
  }
  return p;
}

/** The Node-less Go image's tag, built when missing. */
export function nodelessImage(engine?: Engine): Promise<string> {
  const tag = `airlock-test-nodeless:${createHash('sha256').update(NODELESS_DOCKERFILE).digest('hex').slice(0, 16)}`;
  return once(`nodeless ${engine?.endpoint.display ?? ''}`, async () => {
    const docker = (engine ?? (await connectEngine(process.env))).docker;
    if (await imageId(docker, tag)) return tag;
    await engineBuild(docker, { tag, context: await buildContextTar(Buffer.from(NODELESS_DOCKERFILE)), what: 'the Node-less test image', emit: () => undefined }, (f) => new AirlockError('IMAGE_BUILD_FAILED', `building ${tag} failed at ${f.where}: ${f.error}\n${f.tail}`));
    return tag;
  });
}

/** The derived sandbox image of `base` (Airlock's runtime added), as a run would make it. */
export function derivedImage(base: string, engine?: Engine): Promise<string> {
  return once(`derived ${base} ${engine?.endpoint.display ?? ''}`, async () => {
    const docker = (engine ?? (await connectEngine(process.env))).docker;
    const airlockRef = await sandboxImage(engine);
    return (await deriveSandboxImage(docker, { baseRef: base, airlockRef, emit: () => undefined, what: base })).ref;
  });
}
