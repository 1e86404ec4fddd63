import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { derivePreset, type PresetContext } from './presets';

// Fixture configuration files with `.test` host names, written into a temp dir per test.
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function fixture(files: Record<string, string>): string {
  const root = mkdtempSync(path.join(os.tmpdir(), 'airlock-presets-'));
  dirs.push(root);
  for (const [rel, text] of Object.entries(files)) {
    const file = path.join(root, rel);
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, text);
  }
  return root;
}

function ctx(root: string, env: NodeJS.ProcessEnv = {}): PresetContext {
  return { env, homeDir: path.join(root, 'home'), cwd: path.join(root, 'project'), rootDir: root, useTools: false };
}

describe('npm preset', () => {
  it('reads the registry and scoped registries from this machine\'s .npmrc files', async () => {
    const root = fixture({
      'home/.npmrc': 'registry=https://npm.user-mirror.test/\n@corp:registry=https://npm.corp.test:8443/\n//npm.corp.test:8443/:_authToken=${NPM_TOKEN}\n',
    });
    const preset = await derivePreset('npm', ctx(root, { NPM_TOKEN: 'not-read' }));
    expect(preset.entries).toEqual([
      { host: 'npm.user-mirror.test', ports: [443] },
      { host: 'npm.corp.test', ports: [8443] },
    ]);
    expect(JSON.stringify(preset)).not.toContain('not-read');
    expect(preset.pending).toEqual([]);
  });

  // Issue 12, attack 6: a project's .npmrc does not widen the preset on its own.
  it('shows, but never allows, the registries a project .npmrc asks for', async () => {
    const root = fixture({
      'home/.npmrc': 'registry=https://npm.user-mirror.test/\n',
      'project/.npmrc': 'registry = "https://npm.project-mirror.test/repository/npm/"\n@evil:registry=https://collector.attacker.test:8443/\n@same:registry=https://npm.user-mirror.test/\n',
    });
    const preset = await derivePreset('npm', ctx(root));
    expect(preset.entries).toEqual([{ host: 'npm.user-mirror.test', ports: [443] }]);
    expect(preset.pending).toEqual([
      { entry: { host: 'npm.project-mirror.test', ports: [443] }, from: 'project .npmrc registry' },
      { entry: { host: 'collector.attacker.test', ports: [8443] }, from: 'project .npmrc @evil:registry' },
    ]);
    expect(preset.notes.join('\n')).toMatch(/project \.npmrc @evil:registry asks for collector\.attacker\.test:8443: not allowed/);
  });

  it('runs npm from the home folder, so the project .npmrc never reaches the preset through npm', async () => {
    const root = fixture({ 'project/.npmrc': '@evil:registry=https://collector.attacker.test/\n' });
    const cwds: string[] = [];
    const preset = await derivePreset('npm', {
      ...ctx(root),
      useTools: true,
      runTool: async (cmd, _args, opts) => {
        if (cmd === 'npm') cwds.push(opts.cwd);
        return JSON.stringify({ registry: 'https://npm.machine.test/' });
      },
    });
    expect(cwds).toEqual([path.join(root, 'home')]);
    expect(preset.entries).toEqual([{ host: 'npm.machine.test', ports: [443] }]);
    expect(preset.pending.map((p) => p.entry.host)).toEqual(['collector.attacker.test']);
  });

  it('asks npm itself when tools are allowed (npm_config_userconfig fixture)', async () => {
    const root = fixture({ 'home/.npmrc': 'registry=http://npm.fixture.test:4873/\n' });
    const env: NodeJS.ProcessEnv = { ...process.env, npm_config_userconfig: path.join(root, 'home/.npmrc') };
    delete env.npm_config_registry;
    delete env.NPM_CONFIG_REGISTRY;
    mkdirSync(path.join(root, 'project'), { recursive: true });
    const preset = await derivePreset('npm', { env, cwd: path.join(root, 'project') });
    expect(preset.entries).toContainEqual({ host: 'npm.fixture.test', ports: [4873] });
  });

  it('asks npm with its update check off (reading config must not contact the registry)', async () => {
    const seen: NodeJS.ProcessEnv[] = [];
    const preset = await derivePreset('npm', {
      env: { KEEP: '1' },
      cwd: os.tmpdir(),
      runTool: async (cmd, _args, opts) => {
        if (cmd === 'npm') seen.push(opts.env);
        return '{"registry":"http://npm.tool.fixture.test:4873/"}';
      },
    });
    expect(seen).toEqual([{ KEEP: '1', GOTOOLCHAIN: 'local', PYTHONSAFEPATH: '1', npm_config_update_notifier: 'false' }]);
    expect(preset.entries).toEqual([{ host: 'npm.tool.fixture.test', ports: [4873] }]);
  });

  it('equals what `npm config get registry` reports on this machine', async () => {
    const env = { ...process.env, npm_config_update_notifier: 'false' };
    const reported = new URL(execFileSync('npm', ['config', 'get', 'registry'], { encoding: 'utf8', env }).trim());
    const preset = await derivePreset('npm', { env: process.env });
    const port = reported.port ? Number(reported.port) : reported.protocol === 'https:' ? 443 : 80;
    expect(preset.entries[0]).toEqual({ host: reported.hostname, ports: [port] });
  });

  it('is empty with a note when nothing is configured', async () => {
    const root = fixture({});
    const preset = await derivePreset('npm', ctx(root));
    expect(preset.entries).toEqual([]);
    expect(preset.notes.join(' ')).toMatch(/no npm registry is configured/);
  });
});

describe('apt preset', () => {
  it('reads one-line and deb822 sources, skipping disabled ones and other extensions', async () => {
    const root = fixture({
      'etc/apt/sources.list': '# comment\ndeb http://deb.fixture.test/debian bookworm main\ndeb-src [arch=amd64 signed-by=/k.gpg] https://src.fixture.test/debian bookworm main\n',
      'etc/apt/sources.list.d/extra.list': 'deb [trusted=yes] https://extra.fixture.test:8443/apt stable main\n',
      'etc/apt/sources.list.d/debian.sources':
        'Types: deb\nURIs: http://mirror-a.fixture.test/debian\n  https://mirror-b.fixture.test/debian\nSuites: bookworm\nComponents: main\n\n' +
        'Types: deb\nURIs: https://off.fixture.test/debian\nEnabled: no\nSuites: bookworm\n',
      'etc/apt/sources.list.d/old.list.disabled': 'deb https://ignored.fixture.test/ stable main\n',
      'etc/apt/sources.list.d/local.list': 'deb file:/srv/repo ./\ndeb http://10.0.0.5/debian bookworm main\n',
    });
    const preset = await derivePreset('apt', ctx(root));
    expect(preset.entries).toEqual([
      { host: 'deb.fixture.test', ports: [80] },
      { host: 'src.fixture.test', ports: [443] },
      { host: 'mirror-a.fixture.test', ports: [80] },
      { host: 'mirror-b.fixture.test', ports: [443] },
      { host: 'extra.fixture.test', ports: [8443] },
    ]);
    expect(preset.notes.join(' ')).toMatch(/10\.0\.0\.5 is an address/);
  });
});

describe('pip preset', () => {
  it('reads PIP_INDEX_URL, pip.conf index-url and multi-line extra-index-url', async () => {
    const root = fixture({
      'home/.config/pip/pip.conf': '[global]\nindex-url = https://pypi.mirror.fixture.test/simple\nextra-index-url =\n    https://extra1.fixture.test/simple\n    file:///opt/local/simple\n',
    });
    const preset = await derivePreset('pip', ctx(root, { PIP_EXTRA_INDEX_URL: 'https://env-extra.fixture.test:8080/simple' }));
    expect(preset.entries).toEqual([
      { host: 'env-extra.fixture.test', ports: [8080] },
      { host: 'pypi.mirror.fixture.test', ports: [443] },
      { host: 'extra1.fixture.test', ports: [443] },
    ]);
  });

  it('reads `pip config list` output of an isolated Python run from the home folder', async () => {
    const root = fixture({});
    const calls: string[] = [];
    const preset = await derivePreset('pip', {
      ...ctx(root),
      useTools: true,
      runTool: async (cmd, args, opts) => {
        calls.push(`${opts.cwd}: ${cmd} ${args.join(' ')}`);
        return cmd === 'python3' && args.join(' ') === '-I -m pip config list' ? "global.index-url='https://pip.tool.fixture.test/simple'\n:env:.find-links='/opt/wheels'\n" : undefined;
      },
    });
    expect(calls).toEqual([`${path.join(root, 'home')}: python3 -I -m pip config list`]);
    expect(preset.entries).toEqual([{ host: 'pip.tool.fixture.test', ports: [443] }]);
  });
});

describe('cargo preset', () => {
  it('follows source replacement and registries in config.toml', async () => {
    const root = fixture({
      'home/.cargo/config.toml':
        '[source.crates-io]\nreplace-with = "mirror"\n\n[source.mirror]\nregistry = "sparse+https://crates.mirror.fixture.test/index/"\n\n' +
        '[registries.corp]\nindex = "https://git.corp.fixture.test/crates-index.git" # comment\n',
    });
    const preset = await derivePreset('cargo', ctx(root));
    expect(preset.entries).toEqual([
      { host: 'crates.mirror.fixture.test', ports: [443] },
      { host: 'git.corp.fixture.test', ports: [443] },
    ]);
  });

  it('shows, but never allows, the registries of the project\'s own Cargo config', async () => {
    const root = fixture({
      'home/.cargo/config.toml': '[registries.corp]\nindex = "https://git.corp.fixture.test/index"\n',
      'project/.cargo/config.toml': '[source.crates-io]\nreplace-with = "evil"\n\n[source.evil]\nregistry = "sparse+https://crates.attacker.test/"\n',
      'project/sub/.cargo/config.toml': '[registries.more]\nindex = "https://more.attacker.test/index"\n',
    });
    const preset = await derivePreset('cargo', { ...ctx(root), cwd: path.join(root, 'project') });
    expect(preset.entries).toEqual([{ host: 'git.corp.fixture.test', ports: [443] }]);
    expect(preset.pending.map((p) => p.entry.host)).toEqual(['crates.attacker.test']);
    expect(preset.notes.join(' ')).toMatch(/project \.cargo\/config\.toml source\.evil\.registry asks for crates\.attacker\.test/);
  });

  it('derives the default registry from Cargo’s own cache when nothing is replaced', async () => {
    const root = fixture({
      'home/.cargo/registry/index/index.fixture.test-0123456789abcdef/config.json': '{"dl":"https://static.fixture.test/crates","api":"https://api.fixture.test"}',
    });
    const preset = await derivePreset('cargo', ctx(root));
    expect(preset.entries).toEqual([
      { host: 'index.fixture.test', ports: [443] },
      { host: 'static.fixture.test', ports: [443] },
    ]);
  });
});

describe('go preset', () => {
  it('reads GOPROXY lists and GOSUMDB, noting "direct"', async () => {
    const root = fixture({});
    const preset = await derivePreset('go', ctx(root, { GOPROXY: 'https://goproxy.fixture.test,https://backup.fixture.test|direct', GOSUMDB: 'sum.fixture.test+abc123' }));
    expect(preset.entries).toEqual([
      { host: 'goproxy.fixture.test', ports: [443] },
      { host: 'backup.fixture.test', ports: [443] },
      { host: 'sum.fixture.test', ports: [443] },
    ]);
    expect(preset.notes.join(' ')).toMatch(/direct/);
  });

  it('reads the file `go env -w` writes', async () => {
    const root = fixture({ 'home/.config/go/env': 'GOPROXY=https://written.fixture.test\nGOSUMDB=off\n' });
    const preset = await derivePreset('go', ctx(root));
    expect(preset.entries).toEqual([{ host: 'written.fixture.test', ports: [443] }]);
  });
});

it('refuses an unknown preset with a typed error', async () => {
  await expect(derivePreset('maven' as never, { env: process.env })).rejects.toMatchObject({ kind: 'INVALID_INPUT' });
});
