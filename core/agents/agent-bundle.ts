import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

/** The built-in agent's source entry (runs inside the sandbox). */
export const AGENT_ENTRY = fileURLToPath(new URL('../../resources/sandbox/agent/main.ts', import.meta.url));

export { AGENT_DIR_IN_IMAGE, AGENT_SCRIPT_IN_IMAGE } from './agent-image-paths';

let cached: Promise<{ files: Record<string, Buffer>; hash: string }> | undefined;

/**
 * Bundles the built-in agent into one CommonJS file for Node 18 (the image's Debian Node), no
 * dependencies. `files` are relative to `/opt/airlock/agent/`; `hash` is the SHA-256 of their
 * content (part of the image tag). Built once per process.
 */
export function buildAgentBundle(): Promise<{ files: Record<string, Buffer>; hash: string }> {
  cached ??= (async () => {
    const result = await build({
      entryPoints: [AGENT_ENTRY],
      bundle: true,
      platform: 'node',
      target: 'node18',
      format: 'cjs',
      write: false,
      minify: false,
      sourcemap: false,
      legalComments: 'none',
      logLevel: 'silent',
      banner: { js: '// Airlock built-in agent (generated from resources/sandbox/agent; do not edit)' },
    });
    const js = result.outputFiles[0];
    if (!js) throw new Error('esbuild produced no output for the built-in agent');
    const files: Record<string, Buffer> = {
      'agent.js': Buffer.from(js.contents),
      // An explicit package.json keeps Node from treating the file as ESM under a parent "type": "module".
      'package.json': Buffer.from('{"type":"commonjs","private":true}\n'),
    };
    const hash = createHash('sha256');
    for (const name of Object.keys(files).sort()) hash.update(name).update('\0').update(files[name]!).update('\0');
    return { files, hash: hash.digest('hex') };
  })();
  cached.catch(() => {
    cached = undefined;
  });
  return cached;
}
