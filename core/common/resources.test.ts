import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findPackageRoot, locateResources, resourcePaths } from './resources';

/** The three ways Airlock ships, as folder layouts, and what the one resolver answers for each. */
describe('resource resolver', () => {
  let tmp: string;
  const pkg = (dir: string, name: string) => mkdir(dir, { recursive: true }).then(() => writeFile(path.join(dir, 'package.json'), JSON.stringify({ name })));

  beforeAll(async () => {
    tmp = await mkdtemp(path.join(os.tmpdir(), 'airlock-resources-'));
  });
  afterAll(async () => {
    await rm(tmp, { recursive: true, force: true });
  });

  it('finds a source checkout from any depth of its bundles or sources', async () => {
    const root = path.join(tmp, 'checkout');
    await pkg(root, 'airlock');
    await mkdir(path.join(root, 'out', 'cli', 'chunks'), { recursive: true });
    for (const from of [path.join(root, 'out', 'cli'), path.join(root, 'out', 'cli', 'chunks'), path.join(root, 'core', 'common')]) {
      const r = await locateResources(from, undefined);
      expect(r).toEqual({
        appRoot: root,
        packaged: false,
        sandboxDir: path.join(root, 'resources', 'sandbox'),
        payloadDir: path.join(root, 'out', 'sandbox'),
        vmDir: path.join(root, 'resources', 'vm'),
        rendererDir: path.join(root, 'out', 'renderer'),
        preloadFile: path.join(root, 'out', 'preload', 'index.cjs'),
      });
    }
  });

  it('finds an npm-installed CLI inside node_modules, skipping packages of other names', async () => {
    const prefix = path.join(tmp, 'prefix', 'lib', 'node_modules');
    const root = path.join(prefix, 'airlock');
    await pkg(root, 'airlock');
    await pkg(path.join(root, 'node_modules', 'dockerode'), 'dockerode');
    const r = await locateResources(path.join(root, 'node_modules', 'dockerode', 'lib'), undefined);
    expect(r.appRoot).toBe(root);
    expect(r.packaged).toBe(false);
    expect(r.payloadDir).toBe(path.join(root, 'out', 'sandbox'));
  });

  it('puts what the engine reads beside app.asar in a packaged app, and keeps the UI in the app', async () => {
    const resources = path.join(tmp, 'Airlock', 'resources');
    const root = path.join(resources, 'app.asar');
    await pkg(root, 'airlock');
    const r = await locateResources(path.join(root, 'out', 'main', 'chunks'), resources);
    expect(r).toEqual({
      appRoot: root,
      packaged: true,
      sandboxDir: path.join(resources, 'sandbox'),
      payloadDir: path.join(resources, 'sandbox', 'payload'),
      vmDir: path.join(resources, 'vm'),
      rendererDir: path.join(root, 'out', 'renderer'),
      preloadFile: path.join(root, 'out', 'preload', 'index.cjs'),
    });
  });

  it('is not fooled by `electron .` in a checkout (resourcesPath is Electron\'s own folder)', async () => {
    const root = path.join(tmp, 'checkout');
    const r = await locateResources(path.join(root, 'out', 'main'), path.join(root, 'node_modules', 'electron', 'dist', 'resources'));
    expect(r.packaged).toBe(false);
    expect(r.sandboxDir).toBe(path.join(root, 'resources', 'sandbox'));
  });

  it('says where it looked when there is no package root', async () => {
    await expect(findPackageRoot(path.join(tmp, 'nowhere'))).rejects.toThrow(/cannot find Airlock's package root/);
  });

  it('answers for this checkout: the files it names exist', async () => {
    const r = resourcePaths();
    expect(r.packaged).toBe(false);
    expect(path.join(r.sandboxDir, 'Dockerfile')).toSatisfy((p: string) => p.startsWith(r.appRoot));
    const { access } = await import('node:fs/promises');
    await access(path.join(r.sandboxDir, 'Dockerfile'));
    await access(path.join(r.vmDir, 'guest-init.sh'));
    await access(path.join(r.payloadDir, 'helper.js')); // built by the test setup
  });
});
