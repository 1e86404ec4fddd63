import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runTool } from '../common/run-tool';
import { derivePresets, PRESET_NAMES } from './presets';

// Issue 22, item 1: deriving a preset must never run or read the project's code on the host.
// A project plants everything the host tools would pick up from their working directory; real
// Python (isolated or not, it is the real interpreter that imports or does not) and real npm run,
// behind stand-ins for the version managers that choose them (pyenv/asdf/mise/nvm/volta read
// `.python-version`, `.tool-versions`, `.nvmrc` from the folder they run in, and `go` switches
// toolchains on a go.mod `toolchain` line unless GOTOOLCHAIN=local). Markers say what ran.

const windows = process.platform === 'win32';
let root = '';
let project = '';
let home = '';
let marks = '';
let shims = '';

function write(file: string, text: string, mode?: number): void {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, text);
  if (mode) chmodSync(file, mode);
}

/** A Python module that leaves a marker when imported. */
const planted = (name: string) => `open(${JSON.stringify(path.join(marks, `ran-${name}`))}, 'w').write('ran')\n`;

/** A version-manager stand-in: records any version file it finds from its cwd upwards, then runs the real tool. */
function shim(name: string, files: string[], exec: string): void {
  write(
    path.join(shims, name),
    `#!/bin/sh
d="$PWD"
while :; do
  for f in ${files.join(' ')}; do [ -f "$d/$f" ] && echo "${name} read $d/$f" >> "${marks}/version-files"; done
  [ "$d" = / ] && break
  d=$(dirname "$d")
done
${exec}
`,
    0o755,
  );
}

function realTool(cmd: string, args: string[]): string {
  return execFileSync(cmd, args, { cwd: os.tmpdir(), encoding: 'utf8' }).trim();
}

beforeAll(() => {
  if (windows) return;
  root = mkdtempSync(path.join(os.tmpdir(), 'airlock-preset-plant-'));
  project = path.join(root, 'project');
  home = path.join(root, 'home');
  marks = path.join(root, 'marks');
  shims = path.join(root, 'bin');
  mkdirSync(marks, { recursive: true });
  mkdirSync(home, { recursive: true });
  // The project: modules Python would import from its working directory, version files, a go.mod
  // that names another toolchain, an .npmrc and a Cargo config naming their own registries.
  for (const mod of ['pip/__init__.py', 'sitecustomize.py', 'usercustomize.py', 'json/__init__.py', 'runpy.py', 'typing.py']) {
    write(path.join(project, mod), planted(mod.replace(/[/.]/g, '_')));
  }
  write(path.join(project, 'pip/__main__.py'), planted('pip_main'));
  write(path.join(project, '.python-version'), 'airlock-planted\n');
  write(path.join(project, '.tool-versions'), 'python airlock-planted\nnodejs airlock-planted\ngolang airlock-planted\n');
  write(path.join(project, '.nvmrc'), 'airlock-planted\n');
  write(path.join(project, 'go.mod'), 'module planted.invalid/x\n\ngo 1.21\n\ntoolchain go1.99.0\n');
  write(path.join(project, 'go.work'), 'go 1.21\n\nuse .\n');
  write(path.join(project, 'package.json'), JSON.stringify({ name: 'planted', volta: { node: '99.0.0' }, scripts: { preinstall: `touch ${marks}/ran-npm-script` } }));
  write(path.join(project, 'evil.js'), `require('fs').writeFileSync(${JSON.stringify(path.join(marks, 'ran-node-options'))}, 'ran');\n`);
  write(path.join(project, '.npmrc'), `registry=https://npm.project.invalid/\nnode-options=--require ${path.join(project, 'evil.js')}\nonload-script=${path.join(project, 'evil.js')}\nglobalconfig=${path.join(project, 'global.npmrc')}\nuserconfig=${path.join(project, 'user.npmrc')}\n`);
  write(path.join(project, 'user.npmrc'), 'registry=https://npm.userconfig.project.invalid/\n');
  write(path.join(project, '.cargo/config.toml'), '[registries.planted]\nindex = "https://cargo.project.invalid/index"\n');

  // Stand-ins first on PATH, then the real tools' folders (absolute: found by the real lookup).
  const python = realTool('python3', ['-c', 'import sys; print(sys.executable)']);
  const npm = realTool('sh', ['-c', 'command -v npm']);
  shim('python3', ['.python-version', '.tool-versions'], `exec "${python}" "$@"`);
  shim('npm', ['.nvmrc', '.node-version', '.tool-versions'], `exec "${npm}" "$@"`);
  shim(
    'go',
    ['.tool-versions'],
    `if [ -f "$PWD/go.mod" ] && grep -q '^toolchain' "$PWD/go.mod" && [ "$GOTOOLCHAIN" != local ]; then echo switched > "${marks}/ran-go-toolchain"; fi
printf 'https://goproxy.machine.test\\nsum.machine.test\\n'`,
  );
});

afterAll(() => {
  if (root) rmSync(root, { recursive: true, force: true });
});

describe.skipIf(windows)('presets never run or read the project (issue 22, item 1)', () => {
  it('derives every preset with the project as the working folder, and nothing planted there runs or is read', async () => {
    const env: NodeJS.ProcessEnv = {
      PATH: [shims, path.dirname(process.execPath), '/usr/local/bin', '/usr/bin', '/bin'].join(path.delimiter),
      HOME: home,
      // No pip config anywhere: pip is asked for its built-in index (a Python run), as on a fresh machine.
      PIP_CONFIG_FILE: os.devNull,
      npm_config_userconfig: path.join(home, '.npmrc'),
      npm_config_globalconfig: path.join(home, 'global-npmrc'),
    };
    write(path.join(home, '.npmrc'), 'registry=https://npm.machine.test/\n');
    const presets = await derivePresets(PRESET_NAMES, { env, homeDir: home, cwd: project, rootDir: path.join(root, 'sysroot') });

    expect(readdirSync(marks).filter((f) => f.startsWith('ran-'))).toEqual([]);
    expect(existsSync(path.join(marks, 'version-files')) ? readFileSync(path.join(marks, 'version-files'), 'utf8') : '').toBe('');
    const byName = new Map(presets.map((p) => [p.name, p]));
    // The tools did run (from the home folder), so the test saw them.
    expect(byName.get('npm')?.entries).toEqual([{ host: 'npm.machine.test', ports: [443] }]);
    expect(byName.get('go')?.entries.map((e) => e.host)).toEqual(['goproxy.machine.test', 'sum.machine.test']);
    expect(byName.get('pip')?.sources.join('\n')).toMatch(/pip's built-in default index/);
    // What the project's own files name is shown, never allowed.
    const allowed = presets.flatMap((p) => p.entries.map((e) => e.host));
    expect(allowed.filter((h) => h.endsWith('.invalid'))).toEqual([]);
    expect(byName.get('npm')?.pending.map((p) => p.entry.host)).toEqual(['npm.project.invalid']);
    expect(byName.get('cargo')?.pending.map((p) => p.entry.host)).toEqual(['cargo.project.invalid']);
  });

  it('runs no tool when the home folder is inside the project', async () => {
    const env = { PATH: [shims, '/usr/bin', '/bin'].join(path.delimiter), PIP_CONFIG_FILE: os.devNull };
    const presets = await derivePresets(['pip', 'go'], { env, homeDir: project, cwd: project, rootDir: path.join(root, 'sysroot') });
    expect(readdirSync(marks).filter((f) => f.startsWith('ran-'))).toEqual([]);
    expect(presets.flatMap((p) => p.sources)).toEqual([]);
  });

  it('host tools run by runTool start in the home folder, never the current folder', async () => {
    const before = process.cwd();
    process.chdir(project);
    try {
      const r = await runTool('python3', ['-c', 'import os, sys; print(os.getcwd()); print(os.environ.get("GOTOOLCHAIN"))'], { env: { PATH: `${shims}${path.delimiter}/usr/bin:/bin` } });
      const [cwd, toolchain] = r.stdout.toString('utf8').trim().split('\n');
      expect(cwd).toBe(os.homedir());
      expect(toolchain).toBe('local');
    } finally {
      process.chdir(before);
    }
    expect(readdirSync(marks).filter((f) => f.startsWith('ran-'))).toEqual([]);
    expect(existsSync(path.join(marks, 'version-files'))).toBe(false);
  });
});
