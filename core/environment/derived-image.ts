import { createHash } from 'node:crypto';
import type Docker from 'dockerode';
import { AirlockError } from '../../contracts/errors';
import type { ImageProgress } from '../sandbox/driver';
import { buildContextTar } from '../sandbox/image';
import { engineBuild, imageId, type BuildFailure } from './engine-build';
import { LABEL_DERIVED_FROM } from '../sandbox/labels';
import { debugLog } from '../common/debug-log';

/**
 * Any image becomes a hardened sandbox (docs/architecture.md §16): the user's image plus Airlock's
 * runtime at /opt/airlock, copied from Airlock's own sandbox image — the helper with its own Node
 * and node-pty, the built-in agent, and the few tools Airlock's own workspace commands need (git,
 * tar, find) with their C libraries and loader, run through that loader so the image's own libraries
 * never matter. The user's image needs a POSIX shell, bash for the agent's commands, and a glibc the
 * official Node build runs on; anything else is refused by the build itself, before a sandbox exists.
 */

/** Bump when the recipe below changes: every derived image is rebuilt. */
export const DERIVE_RECIPE = 'airlock-derive-v5';
export const DERIVED_REPOSITORY = 'airlock-env';
/** Base images are tagged here by their id while derived images build FROM them. */
export const BASE_REPOSITORY = 'airlock-env-base';
/** Airlock's own tools in a derived image; first on the PATH of Airlock's own workspace commands only. */
export const AIRLOCK_TOOLS_BIN = '/opt/airlock/bin';
/** The exit status and marker the recipe uses to say an image cannot host the runtime. */
const INCOMPATIBLE_MARKER = 'airlock-incompatible:';
const TOOLS = ['git', 'tar', 'find'];

export interface DerivedImage {
  /** The derived image's tag (`airlock-env:<hash of base id, runtime, recipe>`). */
  ref: string;
  id: string;
  /** The user's image: the reference it was known by and the engine's id. */
  baseRef: string;
  baseId: string;
  built: boolean;
  /** The image's own PATH (the sandbox keeps it, so the project's tools are found). */
  path?: string;
  /** The image's default user (reported: the sandbox runs as uid 1000 whatever it says). */
  imageUser?: string;
}

/** The derived image's Dockerfile: a tools stage on Airlock's image, then the user's image plus /opt/airlock. */
export function derivedDockerfile(airlockRef: string, baseRef: string): string {
  // Airlock's image carries the tools and their libraries (/opt/airlock/libexec, /opt/airlock/lib); the
  // wrappers here serve the agent-side workspace commands only. The helper never runs them: its own
  // commands start the loader by absolute path (docs/architecture.md §2.3).
  const tools = TOOLS.map(
    (t) =>
      `printf '#!/bin/sh\\n${t === 'git' ? `GIT_EXEC_PATH=${AIRLOCK_TOOLS_BIN} GIT_TEMPLATE_DIR=/opt/airlock/git-templates ` : ''}exec /opt/airlock/lib/ld.so --library-path /opt/airlock/lib /opt/airlock/libexec/${t} "$@"\\n' > $t/bin/${t}; chmod 755 $t/bin/${t}; `,
  ).join('');
  const check = [
    'set -e',
    `if ls /lib/ld-musl-* /usr/lib/ld-musl-* >/dev/null 2>&1; then echo "${INCOMPATIBLE_MARKER} it is built on musl libc (Alpine-style); Airlock's runtime needs glibc"; exit 42; fi`,
    // The helper runs through Airlock's loader, which reads this file whatever it is told (§2.3).
    `if [ -e /etc/ld.so.preload ]; then echo "${INCOMPATIBLE_MARKER} it has /etc/ld.so.preload, which would load its libraries into Airlock's helper; remove that file from the image"; exit 42; fi`,
    `/opt/airlock/lib/ld.so --inhibit-cache --library-path /opt/airlock/lib /opt/airlock/node/node -e 0 >/dev/null 2>&1 || { echo "${INCOMPATIBLE_MARKER} Airlock's Node does not start in it (its kernel or CPU does not run Airlock's own C libraries)"; exit 42; }`,
    `command -v bash >/dev/null 2>&1 || { echo "${INCOMPATIBLE_MARKER} it has no bash (the agent's commands run in bash -lc)"; exit 42; }`,
    'mkdir -p /workspace /airlock',
    'chown 1000:1000 /workspace && chown 0:0 /airlock && chmod 0755 /airlock',
    `grep -q '^[^:]*:[^:]*:1000:' /etc/passwd || echo 'airlock:x:1000:1000:Airlock sandbox user:/home/airlock:/bin/sh' >> /etc/passwd`,
    `grep -q '^[^:]*:[^:]*:1000:' /etc/group || echo 'airlock:x:1000:' >> /etc/group`,
  ].join('; ');
  return [
    `# ${DERIVE_RECIPE}: docs/architecture.md §16`,
    `FROM ${airlockRef} AS airlock`,
    'USER 0:0',
    `RUN set -e; t=/opt/airlock-tools; mkdir -p $t/bin; ${tools}` +
      `ln -s ../node/node $t/bin/node; cp -r /usr/share/git-core/templates $t/git-templates; ${CA_STAGE}`,
    `FROM ${baseRef}`,
    'USER 0:0',
    'COPY --from=airlock /opt/airlock /opt/airlock',
    'COPY --from=airlock /opt/airlock-tools/ /opt/airlock/',
    `RUN ["/bin/sh", "-c", ${JSON.stringify(check)}]`,
    `RUN ["/bin/sh", "-c", ${JSON.stringify(CA_INSTALL)}]`,
    CA_ENV,
    'USER 1000:1000',
    'WORKDIR /workspace',
    '',
  ].join('\n');
}

/**
 * The host's extra CAs in every derived image (docs/architecture.md §16, "Behind a TLS proxy"):
 * Airlock's own image carries them (`/usr/local/share/ca-certificates/airlock-host/`, from the host's
 * `/usr/local/share/ca-certificates` and `NODE_EXTRA_CA_CERTS`, core/sandbox/image.ts), so the tools
 * stage takes them from there with its public bundle; the image gets them in its system store where
 * it has one (`update-ca-certificates`, `update-ca-trust`), and the usual variables point at a bundle
 * of the image's own roots (Airlock's public ones when it has none) plus the extras, unless the image
 * sets them itself. Public material only; with no extras the files hold the public roots alone.
 */
const CA_DIR = '/opt/airlock/ca';
const CA_STAGE =
  'mkdir -p $t/ca/host; for c in /usr/local/share/ca-certificates/airlock-host/*.crt; do [ -f "$c" ] && cp "$c" $t/ca/host/; done; ' +
  'for c in $t/ca/host/*.crt; do if [ -f "$c" ]; then cat "$c"; echo; fi; done > $t/ca/extra.pem; cp /etc/ssl/certs/ca-certificates.crt $t/ca/public.pem';
const CA_INSTALL = [
  `if ls ${CA_DIR}/host/*.crt >/dev/null 2>&1; then`,
  `  if command -v update-ca-certificates >/dev/null 2>&1; then mkdir -p /usr/local/share/ca-certificates/airlock-host && cp ${CA_DIR}/host/*.crt /usr/local/share/ca-certificates/airlock-host/ && update-ca-certificates >/dev/null 2>&1 || true;`,
  `  elif command -v update-ca-trust >/dev/null 2>&1 && [ -d /etc/pki/ca-trust/source/anchors ]; then cp ${CA_DIR}/host/*.crt /etc/pki/ca-trust/source/anchors/ && update-ca-trust extract >/dev/null 2>&1 || true; fi`,
  'fi',
  'sys=""; for f in /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt /etc/ssl/cert.pem; do if [ -s "$f" ]; then sys="$f"; break; fi; done',
  `{ cat "\${sys:-${CA_DIR}/public.pem}"; echo; cat ${CA_DIR}/extra.pem; } > ${CA_DIR}/bundle.pem`,
  `chmod 0644 ${CA_DIR}/bundle.pem ${CA_DIR}/extra.pem`,
].join('\n');
const CA_ENV = `ENV NODE_EXTRA_CA_CERTS=\${NODE_EXTRA_CA_CERTS:-${CA_DIR}/extra.pem} SSL_CERT_FILE=\${SSL_CERT_FILE:-${CA_DIR}/bundle.pem} REQUESTS_CA_BUNDLE=\${REQUESTS_CA_BUNDLE:-${CA_DIR}/bundle.pem} GIT_SSL_CAINFO=\${GIT_SSL_CAINFO:-${CA_DIR}/bundle.pem} CURL_CA_BUNDLE=\${CURL_CA_BUNDLE:-${CA_DIR}/bundle.pem}`;

export interface DeriveOptions {
  /** The user's image as the engine knows it (a tag or an id). */
  baseRef: string;
  /** Airlock's sandbox image (the runtime's source). */
  airlockRef: string;
  emit: (p: ImageProgress) => void;
  /** What the image is, for messages ("image golang:1.22", "the devcontainer of …"). */
  what: string;
}

/**
 * The derived image for a base image, built once and cached by (base image id, Airlock image,
 * recipe): a rebuilt base or a new Airlock gives a new tag, an unchanged pair is reused at once.
 */
export async function deriveSandboxImage(docker: Docker, o: DeriveOptions): Promise<DerivedImage> {
  const base = await docker.getImage(o.baseRef).inspect();
  const airlock = await docker
    .getImage(o.airlockRef)
    .inspect()
    .catch(debugLog.swallow('derivedImage.airlockImage'));
  if (!airlock) throw new AirlockError('NOT_FOUND', `Airlock's sandbox image ${o.airlockRef} is missing; run \`airlock doctor\` to build it.`);
  const mismatch = architectureMismatch(o.what, base.Architecture, airlock.Architecture);
  if (mismatch) throw mismatch;
  const airlockId = airlock.Id;
  const key = createHash('sha256').update(`${DERIVE_RECIPE}\0${base.Id}\0${airlockId}`).digest('hex').slice(0, 20);
  const ref = `${DERIVED_REPOSITORY}:${key}`;
  const pathEnv = (base.Config?.Env ?? []).find((e) => e.startsWith('PATH='))?.slice(5);
  const info = { baseRef: o.baseRef, baseId: base.Id, ...(pathEnv ? { path: pathEnv } : {}), ...(base.Config?.User ? { imageUser: base.Config.User } : {}) };
  const existing = await imageId(docker, ref);
  if (existing) return { ref, id: existing, built: false, ...info };

  // FROM the exact image that was inspected, whatever its tag points at meanwhile.
  const pinned = `${BASE_REPOSITORY}:${base.Id.replace(/^sha256:/, '').slice(0, 20)}`;
  const [repo, tag] = pinned.split(':') as [string, string];
  await docker.getImage(base.Id).tag({ repo, tag });
  o.emit({ phase: 'build', message: `adding Airlock's runtime to ${o.what}`, variant: 'custom' });
  const id = await engineBuild(
    docker,
    { tag: ref, context: await buildContextTar(Buffer.from(derivedDockerfile(o.airlockRef, pinned))), labels: { [LABEL_DERIVED_FROM]: base.Id }, what: `the sandbox for ${o.what}`, emit: o.emit },
    (f) => incompatibleOrFailed(f, o.what),
  );
  return { ref, id, built: true, ...info };
}

/**
 * The runtime copied in (Airlock's Node, node-pty, git with its libraries) is of Airlock's image's
 * architecture and runs on the user's image's C library: both must be one architecture. A
 * devcontainer built `--platform linux/amd64` on an Apple Silicon engine would otherwise fail the
 * recipe's Node check with a misleading "needs glibc" (docs/architecture.md §4 "Image architecture").
 */
export function architectureMismatch(what: string, baseArch: string | undefined, airlockArch: string | undefined): AirlockError | undefined {
  const norm = (a: string | undefined) => (a ?? '').trim().toLowerCase().replace(/^x86_64$/, 'amd64').replace(/^aarch64$/, 'arm64');
  const b = norm(baseArch);
  const a = norm(airlockArch);
  if (!b || !a || a === b) return undefined;
  return new AirlockError(
    'IMAGE_INCOMPATIBLE',
    `${what} is built for ${b}, but the sandbox here runs ${a} (Airlock's runtime in it is ${a}). Build or pull it for ${a} (drop a --platform / FROM --platform=linux/${b}), or choose --environment airlock.`,
    { field: 'environment' },
  );
}

function incompatibleOrFailed(f: BuildFailure, what: string): AirlockError {
  const marker = f.tail.split('\n').find((l) => l.includes(INCOMPATIBLE_MARKER));
  if (marker) return new AirlockError('IMAGE_INCOMPATIBLE', `${what} cannot be used as a sandbox: ${marker.slice(marker.indexOf(INCOMPATIBLE_MARKER) + INCOMPATIBLE_MARKER.length).trim()}. Use an image based on a glibc distribution (Debian, Ubuntu, Fedora…) with bash, or --environment airlock.`, { field: 'environment' });
  if (/\/bin\/sh.*(no such file|not found)|executable file not found|no such file or directory/i.test(`${f.error}\n${f.tail}`)) {
    return new AirlockError('IMAGE_INCOMPATIBLE', `${what} cannot be used as a sandbox: it has no POSIX shell at /bin/sh (a distroless or scratch image). Use an image based on a regular Linux distribution, or --environment airlock.`, { field: 'environment' });
  }
  return new AirlockError('IMAGE_BUILD_FAILED', `Adding Airlock's runtime to ${what} failed at ${f.where}: ${f.error}\n--- last output ---\n${f.tail}\n---`, { field: 'environment' });
}
