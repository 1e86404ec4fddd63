/**
 * The CLI as it ships: scripts/build.mjs bundles this file into out/cli/airlock.js, which
 * bin/airlock.js runs. `--version` is answered here, from the package's own package.json.
 */
const argv = process.argv.slice(2);
if (argv.length === 1 && (argv[0] === '--version' || argv[0] === '-V')) {
  const { packageVersion } = await import('../common/resources');
  process.stdout.write(`airlock ${await packageVersion()}\n`);
} else {
  const { main } = await import('./main');
  process.exitCode = await main(argv);
}

export {};
