import { createHash } from 'node:crypto';
import { AirlockError } from '../../contracts/errors';
import type { DevcontainerEnvironment } from './devcontainer-config';
import { parseFeatureRef } from './feature-ref';
import type { FeatureRegistry } from './feature-registry';
import { featureFromFiles, orderLocalFeatures, readLocalFeatures, type LocalFeature } from './local-features';

/**
 * Published devcontainer features, pinned (docs/architecture.md §16, "Published features"): each
 * is fetched by the host from its registry (feature-registry.ts) and its manifest digest joins the
 * configuration's content hash, so trust is given to that version and a new one asks again; its files
 * join the feature build (local-features.ts), so a new version is a new image and a new prepared key.
 * A feature a published one `dependsOn` is fetched too, with the options it names, as the reference does.
 */

/** At most this many features a configuration may pull in (its own and those they depend on). */
const MAX_FEATURES = 32;

/**
 * The configuration with its published features fetched and pinned: `features` unchanged,
 * `installed` in install order (local and published), `contentHash` covering the digests, and what
 * each asks that the sandbox does not grant added to `notApplied`. Unchanged when it has no features;
 * with local features only, the content hash is unchanged (their files are in it already).
 */
export async function pinFeatures(projectDir: string, cfg: DevcontainerEnvironment, registry: FeatureRegistry): Promise<DevcontainerEnvironment> {
  if (cfg.features.length === 0) return cfg;
  const local = await readLocalFeatures(projectDir, cfg);
  const published: LocalFeature[] = [];
  const queue = cfg.features.filter((f) => !f.local).map((f) => ({ id: f.id, options: f.options }));
  const seen = new Set<string>();
  while (queue.length) {
    const f = queue.shift()!;
    const ref = parseFeatureRef(f.id);
    if (!ref) {
      throw new AirlockError(
        'INVALID_INPUT',
        `${cfg.configPath}: feature '${f.id}' is no registry id (registry/path:version) or known short id; Airlock fetches published features from OCI registries only. Use its registry id, copy it into the project as a local feature ("./name"), or choose --environment airlock.`,
        { field: 'environment' },
      );
    }
    if (seen.has(ref.resource)) continue;
    seen.add(ref.resource);
    if (seen.size + local.length > MAX_FEATURES) throw new AirlockError('INVALID_INPUT', `${cfg.configPath}: more than ${MAX_FEATURES} features (with those they depend on). Remove some, or choose --environment airlock.`, { field: 'environment' });
    const fetched = await registry.fetch(f.id, ref);
    const feature = featureFromFiles(cfg.configPath, { id: f.id, options: { ...ref.legacyOptions, ...f.options } }, ref.resource, fetched.files);
    published.push({ ...feature, published: { resource: ref.resource, digest: fetched.digest } });
    // A hard dependency the configuration lacks comes from its registry, as the reference installs it.
    const meta = dependsOnOptions(fetched.files['devcontainer-feature.json']);
    for (const [dep, options] of Object.entries(meta)) {
      const depRef = parseFeatureRef(dep);
      if (depRef && !cfg.features.some((x) => parseFeatureRef(x.id)?.resource === depRef.resource)) queue.push({ id: dep, options });
    }
  }
  const installed = orderLocalFeatures([...local, ...published], cfg.configPath);
  const h = createHash('sha256').update(cfg.contentHash);
  for (const f of published) h.update(`\0${f.id}\0${f.published!.digest}`);
  const notApplied = [...cfg.notApplied];
  for (const f of published) for (const [key, reason] of Object.entries(f.refused)) notApplied.push({ field: `features["${f.id}"].${key}`, reason });
  return { ...cfg, installed, notApplied, contentHash: published.length ? h.digest('hex') : cfg.contentHash };
}

function dependsOnOptions(meta: Buffer | undefined): Record<string, Record<string, unknown>> {
  if (!meta) return {};
  try {
    const m: unknown = JSON.parse(meta.toString('utf8'));
    const d = typeof m === 'object' && m !== null ? (m as { dependsOn?: unknown }).dependsOn : undefined;
    if (typeof d !== 'object' || d === null || Array.isArray(d)) return {};
    return Object.fromEntries(Object.entries(d).map(([k, v]) => [k, typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {}]));
  } catch {
    return {};
  }
}
