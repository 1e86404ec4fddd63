import { createHash } from 'node:crypto';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { gunzip } from 'node:zlib';
import { promisify } from 'node:util';
import { extract } from 'tar-stream';
import { AirlockError } from '../../contracts/errors';
import { registryScheme, type FeatureRef } from './feature-ref';

/**
 * Fetches a published devcontainer feature from its OCI registry, on the host (docs/architecture.md
 * §16, "Published features"): the tag resolved to a manifest digest, the feature's layer (a tar of
 * devcontainer-feature.json, install.sh and helpers) downloaded, its digest checked, cached by digest
 * under Airlock's home, and unpacked in memory with the path-safety of anything untrusted. Nothing of
 * the feature runs on the host. Anonymous unless the caller passes a credential (the user's, from
 * the keychain); the host's own registry login is never read.
 */

export interface RegistryCredential {
  username: string;
  password: string;
}

export interface FeatureRegistryOptions {
  /** Where verified layers are kept, by digest (`<home>/cache/features`). */
  cacheDir: string;
  /** The user's credential for a registry, when they configured one; none by default. */
  credential?: (registry: string) => Promise<RegistryCredential | undefined>;
}

export interface FetchedFeature {
  ref: FeatureRef;
  /** The manifest's digest: what the feature is pinned by. */
  digest: string;
  /** The layer's digest (the cache key). */
  layerDigest: string;
  /** The feature's files, by path inside it. */
  files: Record<string, Buffer>;
}

export const MANIFEST_TYPE = 'application/vnd.oci.image.manifest.v1+json';
export const FEATURE_LAYER_TYPE = 'application/vnd.devcontainers.layer.v1+tar';
/** A feature is a script and its helpers, not a payload: bounded packed and unpacked. */
const MAX_LAYER_BYTES = 16 * 1024 * 1024;
const MAX_MANIFEST_BYTES = 1024 * 1024;
const MAX_ENTRIES = 2000;
const REQUEST_TIMEOUT_MS = 60_000;

export class FeatureRegistry {
  constructor(private readonly o: FeatureRegistryOptions) {}

  /** Resolves, downloads (or reads from the cache) and unpacks one feature. */
  async fetch(id: string, ref: FeatureRef): Promise<FetchedFeature> {
    const client = new RegistryClient(ref, id, this.o.credential);
    const manifest = await client.manifest();
    const layer = manifest.layers.find((l) => l.mediaType === FEATURE_LAYER_TYPE) ?? (manifest.layers.length === 1 ? manifest.layers[0] : undefined);
    if (!layer || !/^sha256:[0-9a-f]{64}$/.test(layer.digest)) throw featureError(id, `its manifest (${manifest.digest}) has no devcontainer feature layer`, 'check the id: it names an image or artifact that is no devcontainer feature');
    if (layer.size > MAX_LAYER_BYTES) throw featureError(id, `its layer is ${layer.size} bytes, more than the ${MAX_LAYER_BYTES >> 20} MiB a feature may have`, 'install the tool in the Dockerfile instead');
    const file = path.join(this.o.cacheDir, `${layer.digest.slice('sha256:'.length)}.tar`);
    let blob: Buffer | undefined = await readFile(file).catch(() => undefined); // not cached yet: fetched below
    // A cached layer is checked again: the cache is a file anyone with the home can change.
    if (!blob || sha256(blob) !== layer.digest) {
      const fresh = await client.blob(layer.digest);
      blob = fresh;
      if (sha256(fresh) !== layer.digest) throw featureError(id, `the layer downloaded from ${ref.registry} does not match its digest ${layer.digest}`, 'try again; if it persists, the registry (or something between) serves altered content');
      await mkdir(this.o.cacheDir, { recursive: true });
      const tmp = `${file}.${process.pid}.tmp`;
      await writeFile(tmp, fresh);
      await rename(tmp, file);
    }
    return { ref, digest: manifest.digest, layerDigest: layer.digest, files: await unpackFeature(id, blob) };
  }
}

/** The registry client of a home: anonymous, layers cached under `<home>/cache/features`. */
export function featureRegistry(home: string, credential?: FeatureRegistryOptions['credential']): FeatureRegistry {
  return new FeatureRegistry({ cacheDir: path.join(home, 'cache', 'features'), ...(credential ? { credential } : {}) });
}

interface Manifest {
  digest: string;
  layers: Array<{ mediaType: string; digest: string; size: number }>;
}

/** The few OCI distribution calls a feature needs, with the registry's bearer-token challenge answered. */
class RegistryClient {
  private readonly base: string;
  private auth: string | undefined;

  constructor(
    private readonly ref: FeatureRef,
    private readonly id: string,
    private readonly credential: FeatureRegistryOptions['credential'],
  ) {
    this.base = `${registryScheme(ref.registry)}://${ref.registry}/v2/${ref.path}`;
  }

  async manifest(): Promise<Manifest> {
    const version = this.ref.digest ?? this.ref.tag ?? 'latest';
    const res = await this.get(`${this.base}/manifests/${version}`, MANIFEST_TYPE);
    const body = await readBounded(res, MAX_MANIFEST_BYTES, this.id);
    const digest = sha256(body);
    if (this.ref.digest && digest !== this.ref.digest) throw featureError(this.id, `the manifest ${this.ref.registry} sent does not match the pinned digest ${this.ref.digest}`, 'check the id, or pin the digest the registry now serves');
    let json: unknown;
    try {
      json = JSON.parse(body.toString('utf8'));
    } catch {
      throw featureError(this.id, `${this.ref.registry} sent a manifest that is not JSON`, 'check the id and the registry');
    }
    const layers = isRecord(json) && Array.isArray(json.layers) ? json.layers.filter(isRecord) : [];
    return { digest, layers: layers.map((l) => ({ mediaType: String(l.mediaType ?? ''), digest: String(l.digest ?? ''), size: Number(l.size ?? 0) })) };
  }

  async blob(digest: string): Promise<Buffer> {
    return readBounded(await this.get(`${this.base}/blobs/${digest}`, '*/*'), MAX_LAYER_BYTES, this.id);
  }

  /** GET with the registry's challenge answered once; redirects followed by hand (HTTPS only, no credential to another host). */
  private async get(url: string, accept: string): Promise<Response> {
    let res = await this.request(url, accept, this.auth);
    if (res.status === 401 && this.auth === undefined) {
      this.auth = await this.answer(res.headers.get('www-authenticate') ?? '');
      await res.body?.cancel();
      res = await this.request(url, accept, this.auth);
    }
    if (res.ok) return res;
    await res.body?.cancel();
    if (res.status === 404) throw new AirlockError('NOT_FOUND', `Devcontainer feature '${this.id}': ${this.ref.registry} has no ${this.ref.path}${this.ref.digest ? `@${this.ref.digest}` : `:${this.ref.tag ?? 'latest'}`}. Check the id and version, or remove it from "features".`, { field: 'environment' });
    if (res.status === 401 || res.status === 403) {
      throw new AirlockError('UNAUTHORIZED', `Devcontainer feature '${this.id}': ${this.ref.registry} refused an anonymous download (HTTP ${res.status}). Airlock never uses the host's own registry login; use a public feature, copy it into the project as a local feature ("./name"), or choose --environment airlock.`, { field: 'environment' });
    }
    throw featureError(this.id, `${this.ref.registry} answered HTTP ${res.status}`, 'try again later');
  }

  private async request(url: string, accept: string, auth: string | undefined): Promise<Response> {
    let at = new URL(url);
    for (let hop = 0; hop < 5; hop++) {
      const sameHost = at.host === new URL(this.base).host;
      let res: Response;
      try {
        res = await fetch(at, { headers: { accept, ...(auth && sameHost ? { authorization: auth } : {}) }, redirect: 'manual', signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
      } catch (err) {
        throw new AirlockError('UPSTREAM_ERROR', `Devcontainer feature '${this.id}': the registry ${at.host} is unreachable (${(err as Error).cause instanceof Error ? ((err as Error).cause as Error).message : (err as Error).message}). Check the network, or choose --environment airlock.`, { field: 'environment' });
      }
      const to = res.status >= 300 && res.status < 400 ? res.headers.get('location') : null;
      if (!to) return res;
      await res.body?.cancel();
      at = new URL(to, at);
      if (at.protocol !== 'https:' && !(at.protocol === 'http:' && registryScheme(at.host) === 'http')) throw featureError(this.id, `${this.ref.registry} redirected to a plain-HTTP address`, 'use a registry that serves HTTPS');
    }
    throw featureError(this.id, `${this.ref.registry} redirected too many times`, 'check the registry');
  }

  /** A `Bearer realm=…` challenge: an anonymous (or the configured credential's) pull token; `Basic`: only with a credential. */
  private async answer(challenge: string): Promise<string | undefined> {
    const cred = await this.credential?.(this.ref.registry);
    const basic = cred ? `Basic ${Buffer.from(`${cred.username}:${cred.password}`).toString('base64')}` : undefined;
    if (/^basic\b/i.test(challenge)) return basic;
    if (!/^bearer\b/i.test(challenge)) return basic;
    const params = Object.fromEntries([...challenge.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1]!.toLowerCase(), m[2]!]));
    if (!params.realm) return basic;
    const realm = new URL(params.realm);
    if (realm.protocol !== 'https:' && !(realm.protocol === 'http:' && registryScheme(realm.host) === 'http')) throw featureError(this.id, `${this.ref.registry} asks for a token from a plain-HTTP address`, 'use a registry that serves HTTPS');
    if (params.service) realm.searchParams.set('service', params.service);
    realm.searchParams.set('scope', params.scope ?? `repository:${this.ref.path}:pull`);
    let res: Response;
    try {
      res = await fetch(realm, { headers: basic ? { authorization: basic } : {}, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
    } catch (err) {
      throw new AirlockError('UPSTREAM_ERROR', `Devcontainer feature '${this.id}': the registry's token service ${realm.host} is unreachable (${(err as Error).message}). Check the network, or choose --environment airlock.`, { field: 'environment' });
    }
    if (!res.ok) {
      await res.body?.cancel();
      return undefined;
    }
    const body: unknown = JSON.parse((await readBounded(res, MAX_MANIFEST_BYTES, this.id)).toString('utf8'));
    const token = isRecord(body) ? (typeof body.token === 'string' ? body.token : typeof body.access_token === 'string' ? body.access_token : undefined) : undefined;
    return token ? `Bearer ${token}` : undefined;
  }
}

async function readBounded(res: Response, max: number, id: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  if (!res.body) return Buffer.alloc(0);
  const reader = res.body.getReader();
  for (;;) {
    const { done, value: chunk } = await reader.read();
    if (done) break;
    total += (chunk as Uint8Array).length;
    if (total > max) {
      await reader.cancel();
      throw featureError(id, `the registry sent more than ${max >> 20} MiB`, 'a feature is a script and its helpers; install a large tool in the Dockerfile instead');
    }
    chunks.push(Buffer.from(chunk as Uint8Array));
  }
  return Buffer.concat(chunks);
}

/**
 * Unpacks a feature's tar (gzipped or not) in memory: plain files and folders only, each path
 * relative and inside the feature (no absolute path, no `..`, no link), bounded in size and count.
 */
export async function unpackFeature(id: string, blob: Buffer): Promise<Record<string, Buffer>> {
  const tar = blob[0] === 0x1f && blob[1] === 0x8b ? await promisify(gunzip)(blob, { maxOutputLength: MAX_LAYER_BYTES }).catch(() => { throw featureError(id, `its layer unpacks to more than ${MAX_LAYER_BYTES >> 20} MiB or is no gzip stream`, 'install the tool in the Dockerfile instead'); }) : blob;
  const files: Record<string, Buffer> = {};
  let count = 0;
  let total = 0;
  const ex = extract();
  const done = new Promise<void>((resolve, reject) => {
    ex.on('entry', (header, stream, next) => {
      // The entry's stream ends with the archive when it is destroyed: nothing more to report from it.
      stream.on('error', () => undefined);
      const fail = (what: string): void => {
        reject(featureError(id, what, 'the feature is refused as it is; report it to its publisher'));
        ex.destroy();
      };
      count++;
      if (count > MAX_ENTRIES) return fail(`its layer has more than ${MAX_ENTRIES} entries`);
      const name = header.name.replace(/^(\.\/)+/, '').replace(/\/+$/, '');
      if (header.name.startsWith('/') || name.split('/').some((p) => p === '..') || name.includes('\0') || name.includes('\\')) return fail(`its layer has an entry outside the feature (${JSON.stringify(header.name)})`);
      if (header.type === 'directory' || name === '' || name === '.') {
        stream.resume();
        stream.on('end', next);
        return;
      }
      if (header.type !== 'file' && header.type !== 'contiguous-file') return fail(`its layer has a ${header.type} (${name}); a feature is plain files`);
      const parts: Buffer[] = [];
      stream.on('data', (c: unknown) => {
        if (!Buffer.isBuffer(c)) return;
        total += c.length;
        if (total > MAX_LAYER_BYTES) fail(`its files are larger than ${MAX_LAYER_BYTES >> 20} MiB`);
        else parts.push(c);
      });
      stream.on('end', () => {
        files[name] = Buffer.concat(parts);
        next();
      });
    });
    ex.on('finish', resolve);
    ex.on('error', reject);
  });
  ex.end(tar);
  await done.catch((err) => {
    throw err instanceof AirlockError ? err : featureError(id, `its layer is no readable tar (${(err as Error).message})`, 'the feature is refused as it is; report it to its publisher');
  });
  return files;
}

export function sha256(b: Buffer): string {
  return `sha256:${createHash('sha256').update(b).digest('hex')}`;
}

function featureError(id: string, what: string, todo: string): AirlockError {
  return new AirlockError('INVALID_INPUT', `Devcontainer feature '${id}': ${what}. ${todo[0]!.toUpperCase()}${todo.slice(1)}, or choose --environment airlock.`, { field: 'environment' });
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
