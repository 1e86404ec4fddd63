/**
 * The CLI as it ships: scripts/build.mjs bundles this file into out/cli/airlock.js, which
 * bin/airlock.js runs. `--version` is answered here (the version is bundled in from package.json).
 */
const argv = process.argv.slice(2);
if (argv.length === 1 && (argv[0] === '--version' || argv[0] === '-V')) {
  const { APP_VERSION } = await import('../common/app-version');
  process.stdout.write(`airlock ${APP_VERSION}\n`);
} else {
  const { main } = await import('./main');
  // The root: the process's streams and environment are read here and nowhere below (docs/architecture.md §5).
  process.exitCode = await main(argv, { stdout: process.stdout, stderr: process.stderr, stdin: process.stdin, env: process.env });
}

export {};
