import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type Docker from 'dockerode';
import type { RunEnvironment } from '../../contracts/environments';
import { AirlockError } from '../../contracts/errors';
import type { ImageProgress } from '../sandbox/driver';
import { createHash } from 'node:crypto';
import type { ProjectSnapshot } from '../workspace/snapshot';
import { assertRealInside, snapshotContext } from './build-context';
import { debugLog } from '../common/debug-log';
import type { BuildRecords } from './build-records';
import type { DevcontainerEnvironment } from './devcontainer-config';
import type { ComposeService } from './compose-file';
import { buildLocalFeatures, readLocalFeatures } from './local-features';
import { sidecarImage, type SidecarImage } from './compose-sidecars';
import { BASE_REPOSITORY, deriveSandboxImage, type DerivedImage } from './derived-image';
import { tlsFailureHint } from './tls-failure';
import { HOST_CA_DOCKERFILE, withHostCas } from './build-ca';
import { LABEL_HOST_CA } from '../sandbox/labels';
import { engineBuild, imageId, pullImage } from './engine-build';
import type { ResolvedEnvironment } from './environment-choice';

/** What a run records about its environment (run record `environment`, audit `note`). */
export type EnvironmentRecord = RunEnvironment;

export interface PreparedImage {
  derived: DerivedImage;
  record: EnvironmentRecord;
  /** A compose devcontainer's other services, with their images (docs/architecture.md §16). */
  sidecars?: SidecarImage[];
}

export interface PrepareImageOptions {
  projectDir: string;
  /** Airlock's sandbox image (for the built-in and custom agents: the base variant). */
  airlockRef: string;
  emit: (p: ImageProgress) => void;
  /** The host's record of devcontainer builds: an unchanged build is not sent to the engine again (§16). */
  records?: BuildRecords;
}

/**
 * The image a run's environment runs in, built through the engine connection: the user's image
 * (pulled, or built from the devcontainer's Dockerfile with a context that leaves credential-looking
 * files out) plus Airlock's runtime. Undefined for Airlock's own environment.
 */
export async function prepareEnvironmentImage(docker: Docker, env: ResolvedEnvironment, o: PrepareImageOptions): Promise<PreparedImage | undefined> {
  if (env.kind === 'airlock') return undefined;
  if (env.kind === 'image') {
    const what = `image ${env.ref}`;
    if (!(await imageId(docker, env.ref))) await pullImage(docker, env.ref, o.emit);
    const derived = await deriveSandboxImage(docker, { baseRef: env.ref, airlockRef: o.airlockRef, emit: o.emit, what });
    return { derived, record: recordOf(`image:${env.ref}`, 'image', derived, []) };
  }
  const cfg = env.config;
  // The host's extra CAs, when Airlock's image carries any, go into the build's own steps too (build-ca.ts).
  const airlockLabels = (await docker.getImage(o.airlockRef).inspect().catch(() => undefined))?.Config?.Labels ?? {};
  const hostCa = Number(airlockLabels[LABEL_HOST_CA] ?? 0) > 0 ? o.airlockRef : undefined;
  let baseRef: string;
  let contextExcluded: string[] | undefined;
  let sidecars: SidecarImage[] | undefined;
  if (cfg.source.kind === 'image') {
    baseRef = cfg.source.image;
    if (!(await imageId(docker, baseRef))) await pullImage(docker, baseRef, o.emit);
  } else if (cfg.source.kind === 'build') {
    const built = await buildDevcontainerImage(docker, o.projectDir, cfg, cfg.source, o.emit, { tag: 'build', what: `the devcontainer image of ${cfg.configPath}`, ...(o.records ? { records: o.records } : {}), ...(hostCa ? { hostCa } : {}) });
    baseRef = built.ref;
    contextExcluded = built.excluded;
  } else {
    // Compose: the agent's sandbox is made from `service`; the other services run as sidecars.
    const src = cfg.source;
    const ws = await composeServiceImage(docker, o.projectDir, cfg, src.workspace, o.emit, hostCa);
    baseRef = ws.ref;
    contextExcluded = ws.excluded;
    sidecars = await Promise.all(
      src.sidecars.map(async (svc) => {
        const built = await composeServiceImage(docker, o.projectDir, cfg, svc, o.emit, hostCa);
        contextExcluded = [...(contextExcluded ?? []), ...built.excluded];
        return sidecarImage(docker, svc, built.ref);
      }),
    );
  }
  // Published features were fetched and pinned when the environment was checked (published-features.ts).
  if (!cfg.installed && cfg.features.some((f) => !f.local)) throw new AirlockError('INTERNAL', `${cfg.configPath}: its published features were not fetched before the build (pinFeatures)`, { field: 'environment' });
  const features = cfg.installed ?? (await readLocalFeatures(o.projectDir, cfg));
  if (features.length) baseRef = await buildLocalFeatures(docker, cfg, baseRef, features, o.emit);
  const derived = await deriveSandboxImage(docker, { baseRef, airlockRef: o.airlockRef, emit: o.emit, what: `the devcontainer of ${cfg.configPath}` });
  const record = recordOf(`devcontainer:${cfg.configPath}`, 'devcontainer', derived, cfg.notApplied);
  if (cfg.localEnvUsed.length) record.localEnvUsed = cfg.localEnvUsed;
  if (contextExcluded?.length) record.contextExcluded = [...new Set(contextExcluded)];
  if (sidecars?.length) record.sidecars = sidecars.map((s) => ({ service: s.service.name, image: s.image }));
  return { derived, record, ...(sidecars ? { sidecars } : {}) };
}

function recordOf(name: string, kind: 'image' | 'devcontainer', d: DerivedImage, notApplied: EnvironmentRecord['notApplied']): EnvironmentRecord {
  return { name, kind, image: d.ref, imageId: d.id, baseImage: d.baseRef, baseImageId: d.baseId, notApplied, ...(d.imageUser ? { imageUser: d.imageUser } : {}) };
}

/**
 * Builds the devcontainer's Dockerfile. The context is the project folder it names, read as a run's
 * copy-in reads the project (credential-looking files stay on the host, and `.dockerignore` is
 * honoured), so a Dockerfile cannot COPY a secret into a layer.
 */
async function buildDevcontainerImage(
  docker: Docker,
  projectDir: string,
  cfg: DevcontainerEnvironment,
  src: { dockerfile: string; context: string; args: Record<string, string>; target?: string },
  emit: (p: ImageProgress) => void,
  as: { tag: string; what: string; records?: BuildRecords; hostCa?: string },
): Promise<{ ref: string; excluded: string[] }> {
  const contextDir = path.join(projectDir, src.context);
  const dockerfile = path.posix.relative(src.context, src.dockerfile);
  if (dockerfile.startsWith('..')) throw new AirlockError('INVALID_INPUT', `${cfg.configPath}: build.dockerfile '${src.dockerfile}' is outside build.context '${src.context || '.'}'; move it into the context.`, { field: 'environment' });
  // Checked again where it is read: the build sees only the project (build-context.ts).
  await assertRealInside(projectDir, src.context, { file: cfg.configPath, field: 'build.context' });
  await assertRealInside(projectDir, src.dockerfile, { file: cfg.configPath, field: 'build.dockerfile' });
  const projectSnapshot = await snapshotContext(contextDir);
  const excluded = projectSnapshot.excluded.filter((e) => e.kind === 'secret').map((e) => e.path);
  const projectDockerfile = await readFile(path.join(contextDir, dockerfile), 'utf8').catch(() => undefined); // no Dockerfile there: no host-CA rewrite and no build record; the build says what is missing
  // With the host's extra CAs: the rewritten Dockerfile is built, beside the project's files in the context.
  const rewritten = as.hostCa && projectDockerfile !== undefined ? withHostCas(projectDockerfile, as.hostCa) : undefined;
  const snapshot = rewritten === undefined ? projectSnapshot : withContextFile(projectSnapshot, HOST_CA_DOCKERFILE, Buffer.from(rewritten));
  const builtDockerfile = rewritten === undefined ? dockerfile : HOST_CA_DOCKERFILE;
  const ref = `${BASE_REPOSITORY}:${as.tag}-${cfg.contentHash.slice(0, 20)}`;
  const labels = { 'airlock.devcontainer': cfg.configPath };
  // Built before from exactly these inputs, and the tag still names that image: the engine's cache check is skipped.
  const dockerfileText = rewritten ?? projectDockerfile;
  const key = as.records && dockerfileText !== undefined ? await buildKey(docker, as.records, { tag: ref, dockerfile: builtDockerfile, dockerfileText, snapshot, target: src.target, args: src.args, labels }) : undefined;
  if (key && as.records && (await as.records.find(docker, key, ref))) {
    emit({ phase: 'build', message: `${as.what}: unchanged since it was built (same Dockerfile, context and base images)`, variant: 'custom' });
    return { ref, excluded };
  }
  const streams = snapshot.open();
  emit({ phase: 'build', message: `building ${as.what}`, variant: 'custom' });
  const id = await engineBuild(
    docker,
    { tag: ref, context: streams.tar, dockerfile: builtDockerfile, ...(src.target ? { target: src.target } : {}), buildargs: src.args, labels, what: as.what, emit },
    (f) =>
      new AirlockError(
        'IMAGE_BUILD_FAILED',
        `Building ${as.what} failed at ${f.where}: ${f.error}\n--- last output of that step ---\n${f.tail}\n---\n${tlsFailureHint(`${f.error}\n${f.tail}`) ?? ''}${tlsFailureHint(`${f.error}\n${f.tail}`) ? '\n' : ''}Fix ${src.dockerfile} (try \`docker build -f ${src.dockerfile} ${src.context || '.'}\`), or choose --environment airlock.`,
        { field: 'environment' },
      ),
  );
  if (key && as.records) await as.records.remember(key, id).catch(debugLog.swallow('environment.build-record'));
  return { ref, excluded };
}

/** The build's key in the host's record (build-records.ts): the context digested as it would stream. */
async function buildKey(
  docker: Docker,
  records: BuildRecords,
  b: { tag: string; dockerfile: string; dockerfileText: string; snapshot: ProjectSnapshot; target: string | undefined; args: Record<string, string>; labels: Record<string, string> },
): Promise<string | undefined> {
  const streams = b.snapshot.open();
  const hash = createHash('sha256');
  for await (const chunk of streams.tar) hash.update(chunk as Buffer);
  await streams.manifest;
  return records.keyOf(docker, { tag: b.tag, dockerfile: b.dockerfile, dockerfileText: b.dockerfileText, contextDigest: hash.digest('hex'), ...(b.target ? { target: b.target } : {}), args: b.args, labels: b.labels });
}

/** A compose service's image: pulled when the engine lacks it, or built from its `build` (the same guarded context). */
async function composeServiceImage(docker: Docker, projectDir: string, cfg: DevcontainerEnvironment, svc: ComposeService, emit: (p: ImageProgress) => void, hostCa: string | undefined): Promise<{ ref: string; excluded: string[] }> {
  if (svc.source.kind === 'image') {
    if (!(await imageId(docker, svc.source.image))) await pullImage(docker, svc.source.image, emit);
    return { ref: svc.source.image, excluded: [] };
  }
  return buildDevcontainerImage(docker, projectDir, cfg, svc.source, emit, { tag: `svc-${svc.name.toLowerCase()}`, what: `the compose service '${svc.name}' of ${cfg.configPath}`, ...(hostCa ? { hostCa } : {}) });
}

/** A context snapshot with one more file at its root (replacing a project file of that name). */
function withContextFile(snapshot: ProjectSnapshot, name: string, content: Buffer): ProjectSnapshot {
  const entries = snapshot.entries.filter((e) => e.path !== name);
  entries.push({ path: name, type: 'file', mode: 0o644, size: content.length, mtimeMs: 0, content });
  return { ...snapshot, entries, fileCount: entries.filter((e) => e.type === 'file').length, totalBytes: snapshot.totalBytes + content.length };
}
