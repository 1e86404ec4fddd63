/**
 * The CLI as it ships: scripts/build.mjs bundles this file into out/cli/airlock.js, which
 * bin/airlock.js runs. `--version` is answered here, from the package's own package.json.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';

async function version(): Promise<string> {
  const { resourcePaths } = await import('../common/resources');
  const pkg = JSON.parse(await readFile(path.join(resourcePaths().appRoot, 'package.json'), 'utf8')) as { version?: unknown };
  return typeof pkg.version === 'string' ? pkg.version : 'unknown';
}

const argv = process.argv.slice(2);
if (argv.length === 1 && (argv[0] === '--version' || argv[0] === '-V')) {
  process.stdout.write(`airlock ${await version()}\n`);
} else {
  const { main } = await import('./main');
  process.exitCode = await main(argv);
}
