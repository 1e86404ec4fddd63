import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { access, chmod, cp, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { extractAll, listPackage, statFile } from '@electron/asar';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { connectEngine } from '../../core/sandbox/docker/engine';
import { describeSandboxImage } from '../../core/sandbox/image';
import { engineArch } from '../../core/sandbox/sandbox-arch';
import { ensureBuilt, root } from '../../scripts/build.mjs';
import { CHROMIUM } from '../e2e/support/browser';
import { requirePrerequisite } from '../support/prerequisites';

/**
 * The desktop app as electron-builder packages it (`electron-builder --dir`, the same configuration
 * as `npm run dist`). No Electron binary can be downloaded on this machine, so the package is built
 * against a STAND-IN Electron distribution: a small file carrying Electron's fuse wire (so the fuses
 * step runs and can be checked), not a working Electron. Then the packaged main process is started
 * under Node with only the `electron` module replaced (test/fixtures/electron-stand-in): it must find
 * every resource in the packaged tree, and the packaged UI, opened in Chromium with its bridge answered
 * by that main process, must work.
 */
const docker = await requirePrerequisite('docker');
const browserOk = await requirePrerequisite('chromium');

const FUSE_SENTINEL = 'dL7pKGdnNz796PbbjQWNKmHXBZaB9tsX';
// Electron's own defaults for the 8 fuses of wire version 1 ('1' on, '0' off).
const STAND_IN_FUSES = '10110001';

function execOk(cmd: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { ...opts, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => (err ? reject(new Error(`${cmd} ${args.join(' ')}: ${err.message}\n${stdout}\n${stderr}`)) : resolve(stdout)));
  });
}

describe.skipIf(!docker.ok || !browserOk.ok)('the packaged desktop app (electron-builder --dir against a stand-in Electron)', () => {
  let tmp: string;
  let unpacked: string;
  let resources: string;
  let asarFiles: string[];

  beforeAll(async () => {
    await ensureBuilt(['bundles', 'app']);
    tmp = await mkdtemp(path.join(os.tmpdir(), 'airlock-dist-'));
    const standIn = path.join(tmp, 'electron-stand-in');
    await execOk('mkdir', ['-p', standIn]);
    await writeFile(path.join(standIn, 'electron'), `#!/bin/sh\necho "stand-in Electron distribution for packaging tests; not Electron" >&2\nexit 1\n# ${FUSE_SENTINEL}\u0001\u0008${STAND_IN_FUSES}\n`);
    await chmod(path.join(standIn, 'electron'), 0o755);
    await execOk(process.execPath, [
      path.join(root, 'node_modules', 'electron-builder', 'cli.js'),
      '--config', 'electron-builder.yml', '--dir', '--linux', '--x64',
      `-c.electronDist=${standIn}`, `-c.directories.output=${path.join(tmp, 'dist')}`,
    ], { cwd: root, env: { ...process.env, ELECTRON_SKIP_BINARY_DOWNLOAD: '1' } });
    unpacked = path.join(tmp, 'dist', 'linux-unpacked');
    resources = path.join(unpacked, 'resources');
    asarFiles = listPackage(path.join(resources, 'app.asar'), { isPack: false }).map((f) => f.replace(/\\/g, '/'));
  }, 600_000);

  afterAll(async () => {
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  it('app.asar holds the built main, preload and renderer and the production dependencies, nothing else', () => {
    for (const f of ['/package.json', '/out/main/index.js', '/out/preload/index.cjs', '/out/renderer/index.html']) expect(asarFiles).toContain(f);
    const top = new Set(asarFiles.map((f) => f.split('/')[1]));
    expect([...top].sort()).toEqual(['node_modules', 'out', 'package.json']);
    expect(new Set(asarFiles.filter((f) => f.startsWith('/out/')).map((f) => f.split('/')[2]))).toEqual(new Set(['main', 'preload', 'renderer']));
    const own = asarFiles.filter((f) => !f.startsWith('/node_modules/'));
    expect(own.filter((f) => /\.(ts|tsx|map)$/.test(f))).toEqual([]);
    const modules = new Set(asarFiles.filter((f) => f.startsWith('/node_modules/')).map((f) => f.split('/').slice(2, f.split('/')[2]!.startsWith('@') ? 4 : 3).join('/')));
    for (const dep of ['dockerode', 'ws', 'zod', 'tar-stream', 'ignore', '@napi-rs/keyring']) expect(modules).toContain(dep);
    for (const dev of ['tsx', 'esbuild', 'typescript', 'vitest', 'vite', 'electron', 'electron-builder', 'electron-vite', 'react', 'node', 'playwright-core']) expect(modules).not.toContain(dev);
  });

  it('native modules are unpacked beside the asar', async () => {
    const natives = asarFiles.filter((f) => f.endsWith('.node'));
    expect(natives.length).toBeGreaterThan(0);
    for (const f of natives) {
      expect((statFile(path.join(resources, 'app.asar'), f.slice(1)) as { unpacked?: boolean }).unpacked, f).toBe(true);
      await access(path.join(resources, 'app.asar.unpacked', f));
    }
    expect(natives.some((f) => f.includes('@napi-rs/keyring'))).toBe(true);
  });

  it('the sandbox and VM resources are extra resources beside the asar', async () => {
    for (const f of ['sandbox/Dockerfile', 'sandbox/agents.Dockerfile', 'sandbox/payload/helper.js', 'sandbox/payload/agent/agent.js', 'sandbox/payload/agent/package.json', 'vm/guest-init.sh']) {
      await access(path.join(resources, f));
    }
    const extra = (await readdir(resources)).sort();
    expect(extra).toEqual(['app.asar', 'app.asar.unpacked', 'sandbox', 'vm']);
  });

  it('the fuses are set in the packaged executable', async () => {
    const exe = await readFile(path.join(unpacked, 'airlock'));
    const at = exe.indexOf(FUSE_SENTINEL) + FUSE_SENTINEL.length;
    // runAsNode off, cookie encryption on, NODE_OPTIONS off, --inspect off, asar integrity on,
    // only load from asar on, browser V8 snapshot off, file protocol privileges left on.
    expect(exe.subarray(at + 2, at + 10).toString('latin1')).toBe('01001101');
  });

  describe('started from the packaged tree with only `electron` replaced', () => {
    let child: ChildProcess;
    let browser: Browser | undefined;
    const messages: Array<Record<string, unknown>> = [];
    let nextId = 0;
    let stderr = '';
    let home: string;

    async function invoke(channel: string, input: unknown): Promise<unknown> {
      const id = ++nextId;
      child.stdin!.write(`${JSON.stringify({ id, channel, input })}\n`);
      return vi.waitFor(() => {
        const m = messages.find((x) => x.type === 'result' && x.id === id);
        if (!m) throw new Error(`no answer to ${channel} yet`);
        return m.envelope;
      }, { timeout: 600_000, interval: 50 });
    }

    beforeAll(async () => {
      // Node cannot read an asar: the app goes where Electron also looks (resources/app), with its
      // unpacked files merged back in, and the stand-in as its `electron` module.
      const app = path.join(resources, 'app');
      extractAll(path.join(resources, 'app.asar'), app);
      await rm(path.join(resources, 'app.asar'));
      await cp(path.join(root, 'test', 'fixtures', 'electron-stand-in'), path.join(app, 'node_modules', 'electron'), { recursive: true });
      home = path.join(tmp, 'home');
      child = spawn(process.execPath, [path.join(app, 'out', 'main', 'index.js')], {
        cwd: tmp,
        env: { ...process.env, AIRLOCK_HOME: home, NODE_OPTIONS: '', AIRLOCK_RENDERER_DIR: '' },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      createInterface({ input: child.stdout! }).on('line', (line) => {
        try {
          messages.push(JSON.parse(line) as Record<string, unknown>);
        } catch {
          // the app's own output
        }
      });
      child.stderr!.on('data', (c: Buffer) => {
        stderr += c.toString('utf8');
      });
    }, 60_000);

    afterAll(async () => {
      await browser?.close().catch(() => undefined);
      child?.kill('SIGKILL');
    });

    it('finds every resource in the packaged tree', async () => {
      const win = await vi.waitFor(() => {
        const m = messages.find((x) => x.type === 'window');
        if (!m) throw new Error(`main opened no window yet; stderr: ${stderr}; messages: ${JSON.stringify(messages)}`);
        return m as { file: string; preload: string; resourcesPath: string };
      }, { timeout: 60_000, interval: 50 });
      expect(messages.filter((m) => m.type === 'error')).toEqual([]);
      const app = path.join(resources, 'app');
      // The window: the UI and the preload from the app.
      expect(win.file).toBe(path.join(app, 'out', 'renderer', 'index.html'));
      expect(win.preload).toBe(path.join(app, 'out', 'preload', 'index.cjs'));
      await access(win.preload);
      // The core: its own check of every file it needs, found beside the app (not in this checkout).
      const doctor = (await invoke('sandboxes:doctor', {})) as { ok: boolean; value: { checks: Array<{ id: string; status: string; detail: string }> } };
      expect(doctor.ok).toBe(true);
      expect(doctor.value.checks.find((c) => c.id === 'resources')).toEqual(expect.objectContaining({ status: 'ok', detail: `sandbox, VM and UI files found in ${resources}` }));
      const pkg = JSON.parse(await readFile(path.join(root, 'package.json'), 'utf8')) as { version: string };
      expect(await invoke('settings:appInfo', {})).toMatchObject({ ok: true, value: { version: pkg.version } });
    });

    it('builds (or finds) the sandbox image from the packaged Dockerfile and payload: the same tag as this checkout', async () => {
      const engine = await connectEngine();
      const expected = (await describeSandboxImage({ arch: await engineArch(engine).finally(() => engine.dispose()) })).ref;
      const built = (await invoke('sandboxes:buildImage', { variant: 'base' })) as { ok: boolean; value?: { image: string } };
      expect(built).toMatchObject({ ok: true, value: { image: expected } });
    });

    it('the packaged UI runs in Chromium, its bridge answered by the packaged main process', async () => {
      const win = messages.find((x) => x.type === 'window') as { file: string };
      expect(win).toBeDefined();
      browser = await chromium.launch({
        executablePath: CHROMIUM,
        headless: true,
        // Electron grants file:// pages module loading (the grantFileProtocolExtraPrivileges fuse); Chromium needs this flag.
        args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--allow-file-access-from-files'],
      });
      const page = await browser.newPage();
      const pageErrors: string[] = [];
      page.on('pageerror', (e) => pageErrors.push(e.message));
      // The preload's bridge (invoke/on/ackTerminal), forwarded to the main process's IPC handler.
      await page.exposeFunction('__standInInvoke', (channel: string, input: unknown) => invoke(channel, input));
      await page.addInitScript(() => {
        const w = window as unknown as { airlock: unknown; __standInInvoke(c: string, i: unknown): Promise<unknown> };
        w.airlock = Object.freeze({ invoke: (c: string, i: unknown) => w.__standInInvoke(c, i), on: () => () => undefined, ackTerminal: () => undefined });
      });
      await page.goto(pathToFileURL(win.file).href);
      await page.getByRole('button', { name: /Setup check/ }).click();
      await expect.poll(() => page.locator('[data-check="docker.engine"]').textContent(), { timeout: 60_000 }).toContain('Container engine');
      await expect.poll(() => page.locator('[data-check="image"]').textContent(), { timeout: 60_000 }).toContain('airlock-sandbox:');
      expect(pageErrors).toEqual([]);
      expect(messages.some((m) => m.type === 'result' && (m.envelope as { ok?: boolean }).ok === true)).toBe(true);
    });
  });
});
