import { AirlockError } from '../../contracts/errors';

/** Files copied into the image under /opt/airlock (paths relative to it), and their content hash. */
export interface SandboxPayload {
  files: Record<string, Buffer>;
  hash: string;
}

export type PayloadProvider = () => Promise<SandboxPayload>;

interface BundleModule {
  [name: string]: unknown;
}

async function loadBundle(specifier: string, exportName: string, optional = false): Promise<SandboxPayload | undefined> {
  let mod: BundleModule;
  try {
    // Resolved at run time so the sandbox module does not depend on the bundlers at type level.
    mod = (await import(/* @vite-ignore */ specifier)) as BundleModule;
  } catch (err) {
    if (optional && (err as NodeJS.ErrnoException).code === 'ERR_MODULE_NOT_FOUND') return undefined;
    throw new AirlockError('INTERNAL', `The sandbox payload module ${specifier} could not be loaded: ${(err as Error).message}`, { cause: err });
  }
  const build = mod[exportName];
  if (typeof build !== 'function') throw new AirlockError('INTERNAL', `${specifier} does not export ${exportName}()`);
  return (await (build as () => Promise<SandboxPayload>)()) as SandboxPayload;
}

/** The helper (at /opt/airlock) plus the built-in agent (at /opt/airlock/agent). */
export async function defaultPayload(): Promise<SandboxPayload> {
  const [helper, agent] = await Promise.all([
    loadBundle('../channel/helper-bundle', 'buildHelperBundle'),
    // The built-in agent is optional until its bundle exists; the image is usable without it.
    loadBundle('../agents/agent-bundle', 'buildAgentBundle', true),
  ]);
  return mergePayloads(agent ? { '': helper as SandboxPayload, agent } : { '': helper as SandboxPayload });
}

/** Merges payloads under sub-directories of /opt/airlock (`''` for the root). */
export function mergePayloads(parts: Record<string, SandboxPayload>): SandboxPayload {
  const files: Record<string, Buffer> = {};
  const hashes: string[] = [];
  for (const [dir, part] of Object.entries(parts).sort(([a], [b]) => a.localeCompare(b))) {
    for (const [name, content] of Object.entries(part.files)) {
      const rel = normalizePayloadPath(dir ? `${dir}/${name}` : name);
      files[rel] = content;
    }
    hashes.push(`${dir}:${part.hash}`);
  }
  return { files, hash: hashes.join(',') };
}

/** Payload paths are relative, forward-slashed and never escape /opt/airlock. */
export function normalizePayloadPath(p: string): string {
  const parts = p.replace(/\\/g, '/').split('/').filter((s) => s !== '' && s !== '.');
  if (parts.length === 0 || parts.includes('..')) throw new AirlockError('INVALID_INPUT', `payload path '${p}' must be a relative path inside /opt/airlock`);
  return parts.join('/');
}
