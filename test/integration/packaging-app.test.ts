import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { access, chmod, cp, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
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
  let fpmRecord: string;

  beforeAll(async () => {
    await ensureBuilt(['bundles', 'app']);
    tmp = await mkdtemp(path.join(os.tmpdir(), 'airlock-dist-'));
    const standIn = path.join(tmp, 'electron-stand-in');
    await execOk('mkdir', ['-p', standIn]);
    await writeFile(path.join(standIn, 'electron'), `#!/bin/sh\necho "stand-in Electron distribution for packaging tests; not Electron" >&2\nexit 1\n# ${FUSE_SENTINEL}\u0001\u0008${STAND_IN_FUSES}\n`);
    await chmod(path.join(standIn, 'electron'), 0o755);
    // fpm (which electron-builder downloads; this machine cannot) is replaced by a stand-in that
    // records the command line electron-builder computes for the .deb and builds the .deb from it
    // with Debian's dpkg-deb (test/fixtures/fpm-dpkg-deb/fpm.mjs).
    fpmRecord = path.join(tmp, 'fpm-args.txt');
    const fpm = path.join(root, 'test', 'fixtures', 'fpm-dpkg-deb', 'fpm.mjs');
    await execOk(process.execPath, [
      path.join(root, 'node_modules', 'electron-builder', 'cli.js'),
      '--config', 'electron-builder.yml', '--linux', 'dir', 'deb', '--x64',
      `-c.electronDist=${standIn}`, `-c.directories.output=${path.join(tmp, 'dist')}`,
    ], { cwd: root, env: { ...process.env, ELECTRON_SKIP_BINARY_DOWNLOAD: '1', CUSTOM_FPM_PATH: fpm, FPM_RECORD: fpmRecord } });
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

  it('the .deb: the project homepage, and electron-builder’s default dependencies (GTK, NSS, X, xdg-utils) with libsecret kept', async () => {
    const args = (await readFile(fpmRecord, 'utf8')).split('\n');
    const value = (flag: string) => {
      const i = args.findIndex((a) => a === flag || a.startsWith(`${flag}=`));
      return i < 0 ? undefined : args[i]!.includes('=') ? args[i]!.slice(flag.length + 1) : args[i + 1];
    };
    const pkg = JSON.parse(await readFile(path.join(root, 'package.json'), 'utf8')) as { homepage: string };
    expect(value('-t')).toBe('deb');
    expect(value('--url')).toBe(pkg.homepage);
    expect(value('--architecture')).toBe('amd64');
    expect(value('--maintainer')).toBe('Airlock contributors');
    const depends = args.flatMap((a, i) => (a === '-d' ? [args[i + 1]] : []));
    // electron-builder 26's own default list (app-builder-lib FpmTarget.getDefaultDepends('deb')), which `deb.depends` would replace.
    const FpmTarget = (createRequire(import.meta.url)('app-builder-lib/out/targets/FpmTarget.js') as { default: { prototype: { getDefaultDepends(t: string): string[] } } }).default;
    const defaults = FpmTarget.prototype.getDefaultDepends('deb');
    expect(defaults).toEqual(expect.arrayContaining(['libgtk-3-0', 'libnss3', 'xdg-utils']));
    expect(depends).toEqual(expect.arrayContaining([...defaults, 'libsecret-1-0']));
    await access(value('--package') as string);
  });

  it('a real .deb (dpkg-deb from electron-builder’s fpm command line): its control fields, files and maintainer scripts', async () => {
    const args = (await readFile(fpmRecord, 'utf8')).split('\n');
    const deb = args[args.indexOf('--package') + 1] as string;
    const pkg = JSON.parse(await readFile(path.join(root, 'package.json'), 'utf8')) as { name: string; version: string; homepage: string };
    const field = async (name: string) => (await execOk('dpkg-deb', ['--field', deb, name])).trim();
    expect(await field('Package')).toBe(pkg.name);
    expect(await field('Version')).toBe(pkg.version);
    expect(await field('Architecture')).toBe('amd64');
    expect(await field('Homepage')).toBe(pkg.homepage);
    const depends = (await field('Depends')).split(/,\s*/);
    expect(depends).toEqual(expect.arrayContaining(['libgtk-3-0', 'libnss3', 'libnotify4', 'libxss1', 'libxtst6', 'xdg-utils', 'libatspi2.0-0', 'libuuid1', 'libsecret-1-0']));
    // Every dependency is a well-formed Debian relation (dpkg parses the whole field).
    await execOk('dpkg-deb', ['--info', deb]);
    const files = (await execOk('dpkg-deb', ['--contents', deb])).split('\n').map((l) => l.split(/\s+/).slice(5).join(' ').replace(/ -> .*$/, ''));
    for (const f of ['./opt/Airlock/airlock', './opt/Airlock/resources/app.asar', './opt/Airlock/resources/sandbox/Dockerfile', './opt/Airlock/resources/vm/guest-init.sh', './usr/share/applications/airlock.desktop']) expect(files, f).toContain(f);
    expect(files.some((f) => /^\.\/opt\/Airlock\/resources\/app\.asar\.unpacked\/node_modules\/@napi-rs\/keyring.*\.node$/.test(f))).toBe(true);
    // The desktop entry starts the installed binary; postinst links it and sets chrome-sandbox's mode.
    const extract = await mkdtemp(path.join(tmp, 'deb-'));
    await execOk('dpkg-deb', ['--raw-extract', deb, extract]);
    expect(await readFile(path.join(extract, 'usr/share/applications/airlock.desktop'), 'utf8')).toMatch(/^Exec=\/opt\/Airlock\/airlock %U$/m);
    const postinst = await readFile(path.join(extract, 'DEBIAN/postinst'), 'utf8');
    expect(postinst).toContain('/opt/Airlock/airlock');
    await access(path.join(extract, 'DEBIAN/postrm'));
  });

  it('each architecture gets its own keyring binding: an arm64 package built on this x64 host carries the arm64 prebuilt', async () => {
    // The same hook serves dmg and nsis (x64 and arm64 from one host); here the Linux target shows it.
    const out = path.join(tmp, 'dist-arm64');
    // npm installed only this host's prebuilt; one a previous run's hook left is removed, so the hook does the work now.
    const hostModules = path.join(root, 'node_modules', '@napi-rs', 'keyring-linux-arm64-gnu');
    await rm(hostModules, { recursive: true, force: true });
    await execOk(process.execPath, [
      path.join(root, 'node_modules', 'electron-builder', 'cli.js'),
      '--config', 'electron-builder.yml', '--linux', 'dir', '--arm64',
      `-c.electronDist=${path.join(tmp, 'electron-stand-in')}`, `-c.directories.output=${out}`,
    ], { cwd: root, env: { ...process.env, ELECTRON_SKIP_BINARY_DOWNLOAD: '1' } });
    const unpackedArm = path.join(out, 'linux-arm64-unpacked', 'resources', 'app.asar.unpacked', 'node_modules', '@napi-rs');
    const binding = path.join(unpackedArm, 'keyring-linux-arm64-gnu', 'keyring.linux-arm64-gnu.node');
    const elf = await readFile(binding);
    // ELF, 64-bit, e_machine EM_AARCH64 (0xb7): a binding the arm64 app can load.
    expect(elf.subarray(0, 4).toString('latin1')).toBe('\x7fELF');
    expect(elf[4]).toBe(2);
    expect(elf.readUInt16LE(18)).toBe(0xb7);
    const version = (JSON.parse(await readFile(path.join(unpackedArm, 'keyring', 'package.json'), 'utf8')) as { version: string }).version;
    expect((JSON.parse(await readFile(path.join(unpackedArm, 'keyring-linux-arm64-gnu', 'package.json'), 'utf8')) as { version: string }).version).toBe(version);
    await rm(hostModules, { recursive: true, force: true });
  }, 600_000);

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
    // apparmor-profile: the .deb's AppArmor profile (electron-builder adds it for Ubuntu 24+ when the deb is built).
    expect(extra).toEqual(['app.asar', 'app.asar.unpacked', 'apparmor-profile', 'sandbox', 'vm']);
  });

  it('the fuses are set in the packaged executable', async () => {
    const exe = await readFile(path.join(unpacked, 'airlock'));
    const at = exe.indexOf(FUSE_SENTINEL) + FUSE_SENTINEL.length;
    // runAsNode off, cookie encryption on, NODE_OPTIONS off, --inspect off, asar integrity on,
    // only load from asar on, browser V8 snapshot off, file protocol privileges off (the UI is app://).
    expect(exe.subarray(at + 2, at + 10).toString('latin1')).toBe('01001100');
  });

  describe('started from the packaged tree with only `electron` replaced', () => {
    let child: ChildProcess;
    let browser: Browser | undefined;
    const messages: Array<Record<string, unknown>> = [];
    let nextId = 0;
    let stderr = '';
    let home: string;

    async function invoke(channel: string, input: unknown): Promise<unknown> {
      return command({ channel, input });
    }

    /** One stand-in command (test/fixtures/electron-stand-in/index.js); its answer. */
    async function command(msg: Record<string, unknown>): Promise<unknown> {
      const id = ++nextId;
      child.stdin!.write(`${JSON.stringify({ id, ...msg })}\n`);
      return vi.waitFor(() => {
        const m = messages.find((x) => x.type === 'result' && x.id === id);
        if (!m) throw new Error(`no answer to ${JSON.stringify(msg)} yet`);
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
        // ELECTRON_RENDERER_URL is set: a packaged app must not obey it (it would load that page with the bridge).
        env: { ...process.env, AIRLOCK_HOME: home, NODE_OPTIONS: '', AIRLOCK_RENDERER_DIR: '', ELECTRON_RENDERER_URL: 'http://127.0.0.1:9/not-the-ui' },
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

    // Chromium cannot open app://; it gets the same responses, from the app's own protocol handler,
    // on a stand-in origin (routed, never on the network), so it enforces the CSP the app sends.
    const UI_ORIGIN = 'http://airlock-ui.invalid';
    async function openUi() {
      browser ??= await chromium.launch({
        executablePath: CHROMIUM,
        headless: true,
        args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
      });
      const page = await browser.newPage();
      await page.route(`${UI_ORIGIN}/**`, async (route) => {
        const url = new URL(route.request().url());
        const r = (await command({ cmd: 'fetch', url: `app://airlock${url.pathname}` })) as { status: number; headers: Record<string, string>; body: string };
        await route.fulfill({ status: r.status, headers: r.headers, body: Buffer.from(r.body, 'base64') });
      });
      return page;
    }

    it('finds every resource in the packaged tree', async () => {
      const win = await vi.waitFor(() => {
        const m = messages.find((x) => x.type === 'window');
        if (!m) throw new Error(`main opened no window yet; stderr: ${stderr}; messages: ${JSON.stringify(messages)}`);
        return m as { url: string; preload: string; resourcesPath: string };
      }, { timeout: 60_000, interval: 50 });
      expect(messages.filter((m) => m.type === 'error')).toEqual([]);
      const app = path.join(resources, 'app');
      // The window: the UI from the app, on its app:// origin (not the URL in the environment), and the app's preload.
      expect(win.url).toBe('app://airlock/index.html');
      const index = (await command({ cmd: 'fetch', url: win.url })) as { status: number; body: string };
      expect(index.status).toBe(200);
      expect(Buffer.from(index.body, 'base64').equals(await readFile(path.join(app, 'out', 'renderer', 'index.html')))).toBe(true);
      expect(win.preload).toBe(path.join(app, 'out', 'preload', 'index.cjs'));
      await access(win.preload);
      // The core: its own check of every file it needs, found beside the app (not in this checkout).
      const doctor = (await invoke('sandboxes:doctor', {})) as { ok: boolean; value: { checks: Array<{ id: string; status: string; detail: string }> } };
      expect(doctor.ok).toBe(true);
      expect(doctor.value.checks.find((c) => c.id === 'resources')).toEqual(expect.objectContaining({ status: 'ok', detail: `sandbox, VM and UI files found in ${resources}` }));
      const pkg = JSON.parse(await readFile(path.join(root, 'package.json'), 'utf8')) as { version: string };
      expect(await invoke('settings:appInfo', {})).toMatchObject({ ok: true, value: { version: pkg.version } });
    });

    it('registers app:// as a privileged standard scheme and serves the UI with one CSP, which the loaded document obeys', async () => {
      const schemes = messages.find((m) => m.type === 'schemes') as { schemes: Array<{ scheme: string; privileges: Record<string, boolean> }> } | undefined;
      expect(schemes?.schemes).toEqual([{ scheme: 'app', privileges: expect.objectContaining({ standard: true, secure: true }) }]);
      // The dev server's header hook is not installed in the packaged app: app:// responses carry the one CSP.
      expect(messages.some((m) => m.type === 'headers-hook')).toBe(false);
      const index = (await command({ cmd: 'fetch', url: 'app://airlock/index.html' })) as { headers: Record<string, string>; body: string };
      const csp = index.headers['content-security-policy'] ?? '';
      expect(csp).toContain("script-src 'self'");
      expect(csp).not.toMatch(/ws:|localhost|unsafe-eval|script-src[^;]*unsafe-inline/);
      expect(Buffer.from(index.body, 'base64').toString('utf8')).not.toMatch(/http-equiv="Content-Security-Policy"/i);
      const page = await openUi();
      await page.goto(`${UI_ORIGIN}/index.html`);
      const probe = await page.evaluate(async () => {
        const violations: string[] = [];
        const inlineRefused = new Promise<void>((resolve) => {
          document.addEventListener('securitypolicyviolation', (e) => {
            violations.push(e.violatedDirective);
            if (e.violatedDirective === 'script-src-elem') resolve();
          });
        });
        const s = document.createElement('script');
        s.textContent = 'window.__inlineRan = true';
        document.head.append(s);
        const connect = await fetch('ws://127.0.0.1:9/').then(() => 'allowed', () => 'blocked');
        // The violation event is queued as a task: wait for it (bounded) rather than for a fixed time.
        await Promise.race([inlineRefused, new Promise((r) => setTimeout(r, 5000))]);
        return { inlineRan: (window as unknown as { __inlineRan?: boolean }).__inlineRan === true, violations, connect, metas: document.querySelectorAll('meta[http-equiv]').length };
      });
      expect(probe).toMatchObject({ inlineRan: false, connect: 'blocked', metas: 0 });
      expect(probe.violations).toEqual(expect.arrayContaining(['script-src-elem']));
      await page.close();
    });

    it('denies permission checks (hid, serial, usb, …) and requests except the UI’s two, for its own origin only', async () => {
      for (const permission of ['hid', 'serial', 'usb', 'media', 'clipboard-read', 'geolocation']) {
        expect(await command({ cmd: 'permission', kind: 'check', permission, origin: 'app://airlock' }), permission).toBe(false);
        expect(await command({ cmd: 'permission', kind: 'request', permission, origin: 'app://airlock/index.html' }), permission).toBe(false);
      }
      expect(await command({ cmd: 'permission', kind: 'check', permission: 'notifications', origin: 'app://airlock' })).toBe(true);
      expect(await command({ cmd: 'permission', kind: 'check', permission: 'notifications', origin: 'https://example.invalid' })).toBe(false);
      expect(await command({ cmd: 'permission', kind: 'request', permission: 'clipboard-sanitized-write', origin: 'app://airlock/index.html' })).toBe(true);
    });

    it('never lets the window name a host path: diffs:exportPatch with destPath is refused', async () => {
      const dest = path.join(tmp, 'written-by-the-page.patch');
      const r = (await invoke('diffs:exportPatch', { runId: 'r-mh0abc12-abcdef12', destPath: dest })) as { ok: boolean; error?: { kind: string; message: string } };
      expect(r).toMatchObject({ ok: false, error: { kind: 'FORBIDDEN' } });
      await expect(access(dest)).rejects.toThrow();
    });

    it('comes back after its window was closed: a second launch re-creates the window, whose bridge works', async () => {
      expect(await command({ cmd: 'close-window' })).toEqual({ windows: 0 });
      expect(await command({ cmd: 'second-instance' })).toEqual({ windows: 1 });
      const wins = messages.filter((m) => m.type === 'window') as Array<{ url: string; webContentsId: number }>;
      expect(wins).toHaveLength(2);
      expect(wins[1]).toMatchObject({ url: 'app://airlock/index.html' });
      expect(wins[1]!.webContentsId).not.toBe(wins[0]!.webContentsId);
      expect(await invoke('settings:appInfo', {})).toMatchObject({ ok: true });
      // Another launch now just shows it.
      expect(await command({ cmd: 'second-instance' })).toEqual({ windows: 1 });
    });

    it('builds (or finds) the sandbox image from the packaged Dockerfile and payload: the same tag as this checkout', async () => {
      const engine = await connectEngine(process.env);
      const expected = (await describeSandboxImage({ env: process.env, arch: await engineArch(engine).finally(() => engine.dispose()) })).ref;
      const built = (await invoke('sandboxes:buildImage', { variant: 'base' })) as { ok: boolean; value?: { image: string } };
      expect(built).toMatchObject({ ok: true, value: { image: expected } });
    });

    it('the packaged UI runs in Chromium, its bridge answered by the packaged main process', async () => {
      const page = await openUi();
      const pageErrors: string[] = [];
      page.on('pageerror', (e) => pageErrors.push(e.message));
      // The preload's bridge (invoke/on/ackTerminal), forwarded to the main process's IPC handler.
      await page.exposeFunction('__standInInvoke', (channel: string, input: unknown) => invoke(channel, input));
      await page.addInitScript(() => {
        const w = window as unknown as { airlock: unknown; __standInInvoke(c: string, i: unknown): Promise<unknown> };
        w.airlock = Object.freeze({ invoke: (c: string, i: unknown) => w.__standInInvoke(c, i), on: () => () => undefined, ackTerminal: () => undefined });
      });
      await page.goto(`${UI_ORIGIN}/index.html`);
      await page.getByRole('button', { name: /Setup check/ }).click();
      await expect.poll(() => page.locator('[data-check="docker.engine"]').textContent(), { timeout: 60_000 }).toContain('Container engine');
      await expect.poll(() => page.locator('[data-check="image"]').textContent(), { timeout: 60_000 }).toContain('airlock-sandbox:');
      expect(pageErrors).toEqual([]);
      expect(messages.some((m) => m.type === 'result' && (m.envelope as { ok?: boolean }).ok === true)).toBe(true);
    });
  });
});
