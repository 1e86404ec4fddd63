/**
 * A published devcontainer feature's id, read as the reference CLI (`@devcontainers/cli`) reads it
 * (docs/architecture.md §16, "Published features"): `registry/path[:tag|@sha256:…]`, lower-cased,
 * `latest` when no tag is given; a legacy short id (`node`, `golang`, `maven`) names its feature
 * under `ghcr.io/devcontainers/features` at major version 1, with the options the reference adds.
 */
export interface FeatureRef {
  /** `ghcr.io`, `localhost:5000`. */
  registry: string;
  /** `devcontainers/features/node`. */
  path: string;
  /** The tag asked for (`1`, `latest`); absent when pinned by digest. */
  tag?: string;
  /** `sha256:…` when the id pins a digest. */
  digest?: string;
  /** `registry/path` (what `dependsOn`/`installsAfter` name, without a version). */
  resource: string;
  /** Options the reference adds for a legacy id (`maven` → java with `installMaven`). */
  legacyOptions?: Record<string, unknown>;
}

const FEATURES = 'ghcr.io/devcontainers/features';
/** The reference's legacy ids that are features of the same name. */
const LEGACY_SAME = ['aws-cli', 'azure-cli', 'desktop-lite', 'docker-in-docker', 'docker-from-docker', 'dotnet', 'git', 'git-lfs', 'github-cli', 'java', 'kubectl-helm-minikube', 'node', 'powershell', 'python', 'ruby', 'rust', 'sshd', 'terraform'];
const LEGACY_RENAMED: Record<string, string> = { golang: 'go', common: 'common-utils' };
const LEGACY_OPTIONS: Record<string, { mapTo: string; options: Record<string, unknown> }> = {
  gradle: { mapTo: 'java', options: { installGradle: true } },
  maven: { mapTo: 'java', options: { installMaven: true } },
  jupyterlab: { mapTo: 'python', options: { installJupyterlab: true } },
};

const PATH_RE = /^[a-z0-9]+([._-][a-z0-9]+)*(\/[a-z0-9]+([._-][a-z0-9]+)*)*$/;
const TAG_RE = /^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$/;

/**
 * Parses a published feature id; undefined when it is no OCI reference (a local `./name`, a
 * tarball URL, or a GitHub-release form the reference still reads but Airlock does not fetch).
 */
export function parseFeatureRef(id: string): FeatureRef | undefined {
  const raw = id.trim().toLowerCase();
  if (!raw || raw.startsWith('.') || raw.startsWith('/') || /^[a-z]+:\/\//.test(raw)) return undefined;
  if (!raw.includes('/')) {
    const same = LEGACY_SAME.includes(raw) ? raw : LEGACY_RENAMED[raw];
    if (same) return parseFeatureRef(`${FEATURES}/${same}:1`);
    const mapped = LEGACY_OPTIONS[raw];
    if (mapped) return { ...(parseFeatureRef(`${FEATURES}/${mapped.mapTo}:1`) as FeatureRef), legacyOptions: mapped.options };
    return undefined;
  }
  let name = raw;
  let tag: string | undefined;
  let digest: string | undefined;
  const at = raw.lastIndexOf('@');
  if (at >= 0) {
    name = raw.slice(0, at);
    digest = raw.slice(at + 1);
    if (!/^sha256:[0-9a-f]{64}$/.test(digest)) return undefined;
  } else {
    const colon = raw.lastIndexOf(':');
    if (colon > raw.lastIndexOf('/')) {
      name = raw.slice(0, colon);
      tag = raw.slice(colon + 1);
    } else tag = 'latest';
    if (!TAG_RE.test(tag)) return undefined;
  }
  const slash = name.indexOf('/');
  const registry = name.slice(0, slash);
  const path = name.slice(slash + 1);
  // As the reference: a registry is a host name (a dot) or localhost; anything else is the GitHub-release form.
  if (!(registry.includes('.') || registry.startsWith('localhost')) || !PATH_RE.test(path)) return undefined;
  return { registry, path, resource: `${registry}/${path}`, ...(tag ? { tag } : {}), ...(digest ? { digest } : {}) };
}

/** Plain HTTP only for a registry on this machine's loopback (tests); everything else is HTTPS. */
export function registryScheme(registry: string): 'http' | 'https' {
  const host = new URL(`http://${registry}`).hostname.toLowerCase();
  return host === 'localhost' || host === '127.0.0.1' || host === '[::1]' ? 'http' : 'https';
}
