/**
 * The programs Airlock runs inside a sandbox as the helper (`as: 'helper'`), as plain CommonJS for
 * Airlock's own Node (`nodeArgv`): no shell, no coreutils, no program looked up on a PATH. In a derived
 * image the project's `/bin/sh`, git and tar would otherwise run as root with the helper's capabilities
 * (docs/architecture.md §2.3). Each takes Airlock's git as a JSON argv (`gitArgv`) and spawns it
 * directly; everything else is done with `fs`.
 */
import { TAR_TO_FAST_IMPORT_FN } from './tar-to-fast-import';

/** Shared: run git (the JSON argv prefix + args) to completion; on failure, exit with its status. */
const RUN_GIT = String.raw`
const fs = require('fs');
const { spawn, spawnSync } = require('child_process');
function git(prefix, args, opts) {
  const r = spawnSync(prefix[0], [...prefix.slice(1), ...args], { stdio: ['ignore', 'inherit', 'inherit'], ...opts });
  if (r.error) { process.stderr.write('git ' + args[0] + ': ' + r.error.message + '\n'); process.exit(127); }
  return r.status === null ? 128 : r.status;
}
function must(prefix, args, opts) { const s = git(prefix, args, opts); if (s !== 0) process.exit(s); }
`;

/**
 * `node -e PREPARE_JS stateDir gitDir workDir attributes exclude gitProgramJson`: the state git dir
 * (bare, no templates, byte-exact attributes), and the spool file the agent's copy writes (0666).
 */
export const PREPARE_JS = `${RUN_GIT}
const [stateDir, gitDir, workDir, attributes, exclude, gitJson] = process.argv.slice(1);
fs.mkdirSync(stateDir, { recursive: true });
fs.mkdirSync(workDir, { recursive: true });
must(JSON.parse(gitJson), ['init', '-q', '--bare', '--template=', gitDir]);
fs.mkdirSync(gitDir + '/info', { recursive: true });
fs.writeFileSync(gitDir + '/info/attributes', attributes);
fs.writeFileSync(gitDir + '/info/exclude', exclude);
// The copy runs as the agent's user and spools here; the baseline (as the helper) reads it and checks
// what it builds against the host's manifest, so a later write by the agent is caught.
const spool = stateDir + '/hydrate.tar';
fs.writeFileSync(spool, '');
fs.chmodSync(spool, 0o666);
`;

/**
 * `node -e BASELINE_JS spool ident baseTree deletionsOnStdin index gitArgvJson ref setHead`: the
 * spooled tar through the converter into `git fast-import` (exit 11 when that fails), the spool
 * removed, HEAD pointed at the baseline (when `setHead`), the tracking index read from it and
 * refreshed, and the commit id printed. With `baseTree`, the commit starts from it and removes the
 * NUL-separated paths read from stdin.
 */
export const BASELINE_JS = `${RUN_GIT}${TAR_TO_FAST_IMPORT_FN}
const [spool, ident, baseTree, deletionsOnStdin, index, gitJson, ref, setHead] = process.argv.slice(1);
const g = JSON.parse(gitJson);
const deletions = deletionsOnStdin === '1' ? fs.readFileSync(0).toString('utf8').split('\\0').filter(Boolean) : [];
const fail = (why) => { if (why) process.stderr.write(why + '\\n'); process.exit(11); };
const importer = spawn(g[0], [...g.slice(1), '-c', 'pack.compression=1', 'fast-import', '--quiet', '--done', ...(baseTree ? ['--force'] : [])], { stdio: ['pipe', 'ignore', 'inherit'] });
importer.on('error', (err) => fail('git fast-import: ' + err.message));
importer.stdin.on('error', () => undefined);
const input = fs.createReadStream(spool);
input.on('error', (err) => fail('reading ' + spool + ': ' + err.message));
tarToFastImport(input, importer.stdin, ref, ident, baseTree, deletions, (err) => {
  if (err) { importer.kill('SIGKILL'); fail(err); }
  importer.stdin.end();
});
importer.on('close', (code) => {
  if (code !== 0) fail('git fast-import exited with ' + code);
  fs.rmSync(spool, { force: true });
  if (setHead === '1') must(g, ['symbolic-ref', 'HEAD', ref]);
  const withIndex = { env: { ...process.env, GIT_INDEX_FILE: index } }; // ambient-ok: runs in the sandbox, its own environment
  must(g, ['read-tree', ref], withIndex);
  // Fills the stat cache; files the agent already changed simply stay stale (-q).
  git(g, ['update-index', '-q', '--refresh'], { ...withIndex, stdio: 'ignore' });
  must(g, ['rev-parse', ref]);
});
`;

/**
 * `node -e SCAN_JS workDir stateDir mark|scan pruneDeps`: with `mark`, (re)writes the checkpoint
 * marker; with `scan`, writes the next marker, prints `changed` when any entry of the workspace
 * (`.git`, and `node_modules` when `pruneDeps` is 1, skipped) changed status since the marker was
 * written (or there is none), and makes the next marker the marker. Stops at the first change.
 */
export const SCAN_JS = String.raw`
const fs = require('fs');
const [work, state, mode, pruneDeps] = process.argv.slice(1);
const mark = state + '/checkpoint.mark', next = state + '/checkpoint.next';
// A write sets the modification time from the kernel's clock, as touch does.
const touch = (p) => fs.writeFileSync(p, String(Date.now()));
if (mode === 'mark') { touch(mark); process.exit(0); }
try { touch(next); } catch { process.exit(3); }
function changedSince(ref) {
  const skip = (name) => name === '.git' || (pruneDeps === '1' && name === 'node_modules');
  const stack = [work];
  while (stack.length) {
    const p = stack.pop();
    let st;
    try { st = fs.lstatSync(p, { bigint: true }); } catch { continue; }
    if (st.ctimeNs > ref) return true;
    if (!st.isDirectory()) continue;
    let names;
    try { names = fs.readdirSync(p); } catch { continue; }
    for (const n of names) if (!skip(n)) stack.push(p + '/' + n);
  }
  return false;
}
let changed;
try { changed = changedSince(fs.statSync(mark, { bigint: true }).mtimeNs); } catch { changed = true; }
fs.renameSync(next, mark);
if (changed) process.stdout.write('changed\n');
`;
