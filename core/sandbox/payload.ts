import { AirlockError } from '../../contracts/errors';
import { loadAgentBundle } from '../agents/agent-bundle';
import { loadHelperBundle } from '../channel/helper-bundle';

/** Files copied into the image under /opt/airlock (paths relative to it), and their content hash. */
export interface SandboxPayload {
  files: Record<string, Buffer>;
  hash: string;
}

export type PayloadProvider = () => Promise<SandboxPayload>;

/** The helper (at /opt/airlock) plus the built-in agent (at /opt/airlock/agent). */
export async function defaultPayload(): Promise<SandboxPayload> {
  const [helper, agent] = await Promise.all([loadHelperBundle(), loadAgentBundle()]);
  return mergePayloads({ '': helper, agent });
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
