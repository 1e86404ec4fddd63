import { createHash } from 'node:crypto';
import { readFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import type Docker from 'dockerode';
import { pack } from 'tar-stream';
import { AirlockError } from '../../contracts/errors';
import { resourcePaths } from '../common/resources';
import { BuildProgressParser, consumeBuildStream } from './build-progress';
import { engineConnectError, engineIdentity, statusCodeOf, type Engine } from './docker/engine';
import type { EngineKind } from './docker/engine-endpoint';
import { createContainerWithProfile, seccompSecurityOpt } from './docker/seccomp-profile';
import type { ImageProgress } from './driver';
import { LABEL_HOST_CA, LABEL_KIND } from './labels';
import { defaultPayload, normalizePayloadPath, type PayloadProvider, type SandboxPayload } from './payload';
import { engineArch, sandboxArchFrom, sandboxBuildArgs, type SandboxArch } from './sandbox-arch';
import { debugLog } from '../common/debug-log';

export const IMAGE_REPOSITORY = 'airlock-sandbox';

/** Where the Dockerfiles live (see core/common/resources.ts). */
export function defaultResourcesDir(): string {
  return resourcePaths().sandboxDir;
}

export interface EnsureImageOptions {
  /** The host's environment, from the root: `AIRLOCK_SANDBOX_ARCH`, `AIRLOCK_SANDBOX_BASE_IMAGE`, `NODE_EXTRA_CA_CERTS`. */
  env: NodeJS.ProcessEnv;
  variant?: 'base' | 'agents';
  onProgress?: (p: ImageProgress) => void;
  /** A user-chosen image: not built, but checked for node/git/tar (IMAGE_INCOMPATIBLE otherwise). */
  image?: string;
  /** The engine the root chose (the image is built where its sandboxes run). */
  engine: Engine | Promise<Engine>;
  /** The files for /opt/airlock; default: the helper bundle plus the built-in agent bundle. */
  payload?: PayloadProvider;
  resourcesDir?: string;
  /** Build even when the tag exists (tests of the build path). */
  force?: boolean;
  /** false: report a missing image as NOT_FOUND instead of building it (`airlock doctor --no-build`). */
  allowBuild?: boolean;
  /**
   * Build for this architecture instead of the engine's own (`AIRLOCK_SANDBOX_ARCH`; needs the
   * engine to emulate it, e.g. binfmt + qemu-user-static). Default: what the engine reports.
   */
  arch?: SandboxArch;
  /**
   * The Debian bookworm image the Dockerfile starts FROM instead of `debian:bookworm-slim`
   * (`AIRLOCK_SANDBOX_BASE_IMAGE`): one of `arch`, for an engine whose `debian:bookworm-slim` is of
   * another architecture (an emulated build, scripts/arm64-check.sh). Named in the tag's hash.
   */
  baseImage?: string;
}

export interface EnsureImageResult {
  ref: string;
  built: boolean;
}

/** Content hash of the build inputs: a changed Dockerfile, payload file or host CA gives a new tag. */
export function contextHash(dockerfile: Buffer, payload: SandboxPayload, extra = '', certs: Record<string, Buffer> = {}): string {
  const h = createHash('sha256');
  h.update('airlock-sandbox-v1\0');
  h.update(extra);
  h.update('\0');
  h.update(dockerfile);
  for (const name of Object.keys(payload.files).sort()) {
    const content = payload.files[name] as Buffer;
    h.update(`\0${normalizePayloadPath(name)}\0${content.length}\0`);
    h.update(content);
  }
  for (const name of Object.keys(certs).sort()) {
    h.update(`\0cert:${name}\0`);
    h.update(certs[name] as Buffer);
  }
  return h.digest('hex').slice(0, 20);
}

/**
 * CA certificates the host added beyond the public set (Debian/Ubuntu's
 * /usr/local/share/ca-certificates, and NODE_EXTRA_CA_CERTS when it is not the system bundle), so
 * a TLS-intercepting proxy that the host trusts works for npm inside the build and the sandbox.
 */
export async function hostExtraCaCerts(env: NodeJS.ProcessEnv): Promise<Record<string, Buffer>> {
  const out: Record<string, Buffer> = {};
  if (process.platform !== 'linux') return out;
  const dir = '/usr/local/share/ca-certificates';
  try {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      if (entry.isFile() && entry.name.endsWith('.crt')) out[entry.name] = await readFile(path.join(dir, entry.name));
    }
  } catch {
    // No local CAs.
  }
  const extra = env.NODE_EXTRA_CA_CERTS;
  if (extra && !extra.startsWith('/etc/ssl/') && !extra.startsWith('/etc/pki/')) {
    try {
      const content = await readFile(extra);
      if (content.length < 1024 * 1024 && content.includes('BEGIN CERTIFICATE')) out['node-extra-ca-certs.crt'] = content;
    } catch {
      // Unreadable: ignore, as Node itself would warn.
    }
  }
  return out;
}

/**
 * A tar build context: the Dockerfile at its root, the payload under `payload/` and host CA
 * certificates under `certs/` (both directories present whenever a payload is given).
 */
export async function buildContextTar(dockerfile: Buffer, payload?: SandboxPayload, certs: Record<string, Buffer> = {}): Promise<Buffer> {
  const p = pack();
  const chunks: Buffer[] = [];
  p.on('data', (c: unknown) => chunks.push(c as Buffer));
  const done = new Promise<void>((resolve, reject) => {
    p.on('end', resolve);
    p.on('error', reject);
  });
  // Fixed mtimes and modes keep the classic builder's COPY cache stable across identical payloads.
  const mtime = new Date(0);
  p.entry({ name: 'Dockerfile', mode: 0o644, mtime }, dockerfile);
  if (payload) {
    p.entry({ name: 'payload/', type: 'directory', mode: 0o755, mtime });
    for (const name of Object.keys(payload.files).sort()) {
      const rel = normalizePayloadPath(name);
      const mode = rel.endsWith('.sh') ? 0o755 : 0o644;
      p.entry({ name: `payload/${rel}`, mode, mtime, uid: 0, gid: 0 }, payload.files[name] as Buffer);
    }
    p.entry({ name: 'certs/', type: 'directory', mode: 0o755, mtime });
    for (const name of Object.keys(certs).sort()) {
      p.entry({ name: `certs/${path.posix.basename(name)}`, mode: 0o644, mtime, uid: 0, gid: 0 }, certs[name] as Buffer);
    }
  }
  p.finalize();
  await done;
  return Buffer.concat(chunks);
}

async function imageExists(docker: Docker, ref: string): Promise<boolean> {
  try {
    await docker.getImage(ref).inspect();
    return true;
  } catch (err) {
    if (statusCodeOf(err) === 404) return false;
    throw err;
  }
}

const inFlight = new Map<string, Promise<EnsureImageResult>>();

/**
 * Makes sure the sandbox image exists, building it on first use (tag = content hash), and returns
 * its reference. Progress arrives as structured events. For a user-chosen `image`, checks that it
 * has node, git and tar instead.
 */
export async function ensureSandboxImage(opts: EnsureImageOptions): Promise<EnsureImageResult> {
  const engine = await opts.engine;
  const emit = opts.onProgress ?? (() => undefined);
  try {
    if (opts.image) {
      emit({ phase: 'check', message: `checking ${opts.image}`, variant: 'custom' });
      await checkImageCompatible(engine.docker, opts.image, (await engineIdentity(engine)).kind);
      emit({ phase: 'done', message: `${opts.image} is usable`, fraction: 1, variant: 'custom' });
      return { ref: opts.image, built: false };
    }
    const resourcesDir = opts.resourcesDir ?? defaultResourcesDir();
    const native = await engineArch(engine);
    const arch = opts.arch ?? archOverride(opts.env) ?? native;
    // A foreign architecture is asked for explicitly; the native one needs no platform parameter (old engines lack it).
    const platform = arch === native ? undefined : `linux/${arch}`;
    emit({ phase: 'context', message: `preparing the sandbox payload (${arch})`, variant: 'base' });
    const baseImage = opts.baseImage ?? baseImageOverride(opts.env);
    const { ref: baseRef, context, buildargs, labels } = await describeSandboxImage({ ...opts, arch, ...(baseImage ? { baseImage } : {}) });
    const base = await buildOnce(engine, baseRef, opts, context, { buildargs, labels, platform }, 'base', emit);
    if ((opts.variant ?? 'base') === 'base') return base;

    const agentsDockerfile = await readFile(path.join(resourcesDir, 'agents.Dockerfile'));
    const agentsRef = `${IMAGE_REPOSITORY}:agents-${arch}-${contextHash(agentsDockerfile, { files: {}, hash: '' }, baseRef)}`;
    const agents = await buildOnce(engine, agentsRef, opts, () => buildContextTar(agentsDockerfile), { buildargs: { BASE: baseRef, ...buildargs }, platform }, 'agents', emit);
    return { ref: agents.ref, built: agents.built || base.built };
  } catch (err) {
    throw (await engineConnectError(err, engine.endpoint, opts.env)) ?? err;
  }
}

/** `AIRLOCK_SANDBOX_ARCH` (amd64/arm64), when set: build for that architecture under the engine's emulation. */
function archOverride(env: NodeJS.ProcessEnv): SandboxArch | undefined {
  const v = env.AIRLOCK_SANDBOX_ARCH?.trim();
  return v ? sandboxArchFrom(v, 'AIRLOCK_SANDBOX_ARCH') : undefined;
}

/** `AIRLOCK_SANDBOX_BASE_IMAGE`, when set: the image the sandbox Dockerfile starts FROM. */
function baseImageOverride(env: NodeJS.ProcessEnv): string | undefined {
  return env.AIRLOCK_SANDBOX_BASE_IMAGE?.trim() || undefined;
}

/** An image reference as a FROM line takes it: name[:tag][@digest], nothing else. */
const IMAGE_REFERENCE = /^[a-z0-9][a-z0-9._/-]*(:[A-Za-z0-9_][A-Za-z0-9._-]{0,127})?(@sha256:[0-9a-f]{64})?$/;

/** The base image's tag: its architecture, then the content hash of the build inputs (the architecture and a non-default FROM included). */
export function baseImageRef(arch: SandboxArch, dockerfile: Buffer, payload: SandboxPayload, certs: Record<string, Buffer> = {}, baseImage?: string): string {
  // `labels=host-ca`: an image under this tag carries the LABEL_HOST_CA label (images built before it did not).
  return `${IMAGE_REPOSITORY}:${arch}-${contextHash(dockerfile, payload, `arch=${arch}\0labels=host-ca${baseImage ? `\0from=${baseImage}` : ''}`, certs)}`;
}

/**
 * The base image's tag, build context and build arguments for one architecture, without an engine:
 * also for builders other than a local Docker engine (the Lima VM's nerdctl). The Dockerfile refuses
 * to build when its build arguments name another architecture than the build's own.
 */
export async function describeSandboxImage(
  opts: Pick<EnsureImageOptions, 'env' | 'payload' | 'resourcesDir' | 'baseImage'> & { arch: SandboxArch },
): Promise<{ ref: string; context: () => Promise<Buffer>; buildargs: Record<string, string>; labels: Record<string, string> }> {
  if (opts.baseImage !== undefined && !IMAGE_REFERENCE.test(opts.baseImage)) {
    throw new AirlockError('INVALID_INPUT', `The sandbox base image '${opts.baseImage.slice(0, 200)}' (AIRLOCK_SANDBOX_BASE_IMAGE) is not an image reference; name a Debian bookworm image of the sandbox's architecture, like airlock-arm64-base:bookworm, or unset it to use debian:bookworm-slim.`, { field: 'AIRLOCK_SANDBOX_BASE_IMAGE' });
  }
  const resourcesDir = opts.resourcesDir ?? defaultResourcesDir();
  const payload = await (opts.payload ?? defaultPayload)();
  const dockerfile = await readFile(path.join(resourcesDir, 'Dockerfile'));
  const certs = await hostExtraCaCerts(opts.env);
  return {
    ref: baseImageRef(opts.arch, dockerfile, payload, certs, opts.baseImage),
    context: () => buildContextTar(dockerfile, payload, certs),
    buildargs: { ...sandboxBuildArgs(opts.arch), ...(opts.baseImage ? { AIRLOCK_BASE_IMAGE: opts.baseImage } : {}) },
    labels: { [LABEL_HOST_CA]: String(Object.keys(certs).length) },
  };
}

async function buildOnce(
  engine: Engine,
  ref: string,
  opts: EnsureImageOptions,
  context: () => Promise<Buffer>,
  build: BuildParams,
  variant: 'base' | 'agents',
  emit: (p: ImageProgress) => void,
): Promise<EnsureImageResult> {
  emit({ phase: 'check', message: `looking for ${ref}`, variant });
  if (!opts.force && (await imageExists(engine.docker, ref))) {
    emit({ phase: 'done', message: `${ref} is ready`, fraction: 1, variant });
    return { ref, built: false };
  }
  if (opts.allowBuild === false) {
    throw new AirlockError('NOT_FOUND', `The sandbox image ${ref} is not built yet. Run \`airlock doctor\` to build it (a few minutes, once).`);
  }
  // Concurrent callers share one build of the same tag.
  let p = inFlight.get(ref);
  if (!p) {
    p = buildImage(engine.docker, ref, context, build, variant, emit).finally(() => inFlight.delete(ref));
    inFlight.set(ref, p);
  }
  return p;
}

/** What the engine's build endpoint is given besides the context: build arguments and, for a foreign architecture, the platform. */
interface BuildParams {
  buildargs: Record<string, string>;
  /** Labels beyond the kind and variant (the base image's host CA count). */
  labels?: Record<string, string>;
  platform?: string;
}

async function buildImage(
  docker: Docker,
  ref: string,
  context: () => Promise<Buffer>,
  { buildargs, labels, platform }: BuildParams,
  variant: 'base' | 'agents',
  emit: (p: ImageProgress) => void,
): Promise<EnsureImageResult> {
  const tar = await context();
  emit({ phase: 'build', message: `building ${ref} (first use; this takes a few minutes)`, fraction: 0, variant });
  const parser = new BuildProgressParser(emit, variant);
  const stream = await docker.buildImage(tar as unknown as NodeJS.ReadableStream, {
    t: ref,
    rm: true,
    forcerm: true,
    buildargs,
    ...(platform ? { platform } : {}),
    labels: { ...labels, [LABEL_KIND]: 'image', 'airlock.variant': variant },
  });
  await consumeBuildStream(stream, parser);
  if (parser.error) throw buildFailure(parser);
  if (!(await imageExists(docker, ref))) {
    throw new AirlockError('IMAGE_BUILD_FAILED', `The engine finished building ${ref} but the image is not there. Run \`airlock doctor\` again.`);
  }
  emit({ phase: 'done', message: `built ${ref}`, fraction: 1, variant });
  return { ref, built: true };
}

/** The typed error for a failed build: DISK_FULL when the disk ran out, else IMAGE_BUILD_FAILED with the step's output tail. */
export function buildFailure(parser: Pick<BuildProgressParser, 'error' | 'step' | 'totalSteps' | 'stepTitle' | 'outputTail'>): AirlockError {
  const where = parser.step ? `step ${parser.step}/${parser.totalSteps} (${parser.stepTitle.slice(0, 120)})` : 'the build';
  const tail = parser.outputTail();
  const full = `${parser.error ?? ''}\n${tail}`;
  if (/no space left on device|disk quota exceeded/i.test(full)) {
    return new AirlockError(
      'DISK_FULL',
      `Building the sandbox image failed at ${where}: the engine's disk is full. Free space (\`docker system prune\`, remove unused images) and run \`airlock doctor\` again.\n${tail}`,
    );
  }
  return new AirlockError(
    'IMAGE_BUILD_FAILED',
    `Building the sandbox image failed at ${where}: ${parser.error}\n--- last output of that step ---\n${tail}\n---\nCheck the network access to the Debian mirror and the npm registry, then run \`airlock doctor\` again.`,
  );
}

const REQUIRED_TOOLS = ['node', 'git', 'tar'] as const;
const compatible = new Set<string>();

/**
 * Checks a user-chosen image for what the helper and the workspace need (node, git, tar) by running
 * a throwaway container without network. IMAGE_INCOMPATIBLE names what is missing.
 */
export async function checkImageCompatible(docker: Docker, ref: string, engineKind: EngineKind = 'docker'): Promise<void> {
  let imageId: string;
  try {
    imageId = (await docker.getImage(ref).inspect()).Id;
  } catch (err) {
    if (statusCodeOf(err) === 404) {
      throw new AirlockError('NOT_FOUND', `Image '${ref}' is not available to the engine. Pull or build it first (docker pull ${ref}), or leave the image setting empty to use Airlock's image.`, { cause: err });
    }
    throw err;
  }
  if (compatible.has(imageId)) return;
  const script = REQUIRED_TOOLS.map((t) => `command -v ${t} >/dev/null 2>&1 || echo "missing:${t}"`).join('; ');
  let container: Docker.Container | undefined;
  try {
    container = await createContainerWithProfile(docker, engineKind, {
      Image: ref,
      Entrypoint: ['/bin/sh', '-c'],
      Cmd: [script],
      User: '0:0',
      Labels: { [LABEL_KIND]: 'image-check' },
      HostConfig: { NetworkMode: 'none', CapDrop: ['ALL'], SecurityOpt: ['no-new-privileges', seccompSecurityOpt()], ReadonlyRootfs: true, AutoRemove: false },
    });
    const out = await container.attach({ stream: true, stdout: true, stderr: true });
    const chunks: Buffer[] = [];
    out.on('data', (c: Buffer) => chunks.push(c));
    const ended = new Promise<void>((resolve) => {
      out.on('end', resolve);
      out.on('close', resolve);
    });
    try {
      await container.start();
    } catch (err) {
      const msg = (err as Error).message;
      if (/no such file|executable file not found|not found/i.test(msg)) {
        throw new AirlockError('IMAGE_INCOMPATIBLE', `Image '${ref}' has no /bin/sh, so it cannot run the Airlock helper (needs: ${REQUIRED_TOOLS.join(', ')}). Use an image based on a regular Linux distribution with node, git and tar installed.`, { cause: err });
      }
      throw err;
    }
    await container.wait();
    await ended;
    // The attach stream is multiplexed; missing:<tool> markers are plain ASCII in the payload.
    const text = Buffer.concat(chunks).toString('latin1');
    const missing = REQUIRED_TOOLS.filter((t) => text.includes(`missing:${t}`));
    if (missing.length > 0) {
      throw new AirlockError(
        'IMAGE_INCOMPATIBLE',
        `Image '${ref}' is missing ${missing.join(', ')}, which Airlock needs inside the sandbox (node runs the helper; git and tar track and copy the workspace). Install ${missing.join(', ')} in the image, or leave the image setting empty to use Airlock's image.`,
      );
    }
    compatible.add(imageId);
  } finally {
    await container?.remove({ force: true }).catch(debugLog.swallow('image.check.container.remove'));
  }
}

/**
 * Removes Airlock sandbox image tags other than `keep` (older builds left by upgrades or helper
 * changes). Images a container still uses are left alone. Returns the removed tags.
 */
export async function pruneSandboxImages(opts: { keep: string[]; engine: Engine; repository?: string }): Promise<string[]> {
  const engine = opts.engine;
  const keep = new Set(opts.keep);
  const repository = opts.repository ?? IMAGE_REPOSITORY;
  const images = await engine.docker.listImages({ filters: { reference: [repository] } });
  const removed: string[] = [];
  for (const img of images) {
    for (const tag of img.RepoTags ?? []) {
      if (keep.has(tag) || !tag.startsWith(`${repository}:`)) continue;
      try {
        await engine.docker.getImage(tag).remove();
        removed.push(tag);
      } catch {
        // In use by a container (409) or already gone: keep going.
      }
    }
  }
  return removed;
}
