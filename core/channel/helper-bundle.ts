/**
 * Builds the in-sandbox helper (resources/sandbox/helper) into one CommonJS file for Node 18 with
 * esbuild. The sandbox image copies `files` into /opt/airlock/ and is tagged by `hash`, so a changed
 * helper gives a new image.
 */
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { AirlockError } from '../../contracts/errors';

export interface HelperBundle {
  /** File name (relative to /opt/airlock) → contents. */
  files: Record<string, Buffer>;
  /** sha256 over the file names and contents. */
  hash: string;
}

/** The helper's entry point in the source tree. */
export const HELPER_ENTRY = fileURLToPath(new URL('../../resources/sandbox/helper/main.ts', import.meta.url));

let cached: Promise<HelperBundle> | undefined;

async function build(): Promise<HelperBundle> {
  const esbuild = await import('esbuild');
  let result;
  try {
    result = await esbuild.build({
      entryPoints: [HELPER_ENTRY],
      bundle: true,
      platform: 'node',
      target: 'node18',
      format: 'cjs',
      write: false,
      outfile: 'helper.js',
      // node-pty is native and lives in the image's /opt/airlock/node_modules.
      external: ['node-pty'],
      legalComments: 'none',
      logLevel: 'silent',
      banner: { js: '// Airlock in-sandbox helper (generated from resources/sandbox/helper; do not edit)' },
    });
  } catch (err) {
    throw new AirlockError('INTERNAL', `could not bundle the sandbox helper: ${(err as Error).message}`, { cause: err });
  }
  const out = result.outputFiles.find((f) => f.path.endsWith('helper.js'));
  if (!out) throw new AirlockError('INTERNAL', 'bundling the sandbox helper produced no helper.js');
  const files: Record<string, Buffer> = { 'helper.js': Buffer.from(out.contents) };
  const hash = createHash('sha256');
  for (const name of Object.keys(files).sort()) {
    hash.update(name).update('\0').update(files[name]!).update('\0');
  }
  return { files, hash: hash.digest('hex') };
}

/** The helper bundle, built once per process. */
export function buildHelperBundle(): Promise<HelperBundle> {
  if (!cached) {
    cached = build();
    cached.catch(() => {
      cached = undefined; // Let a later call retry.
    });
  }
  return cached;
}
