// electron-builder `beforePack` hook (electron-builder.yml): before the app files of each platform and
// architecture are collected, puts that one's @napi-rs/keyring prebuilt into node_modules, so each dmg
// and nsis architecture (x64 and arm64 from one build host) carries its own binding (issue 29 item 3).
// npm installed only the build host's; another is fetched with `npm pack` at the exact version
// @napi-rs/keyring pins and unpacked where npm would put it (an optional dependency npm skipped), so
// electron-builder's production-dependency walk finds it. Nothing is rebuilt: it is N-API. It stays in
// node_modules afterwards (an optional dependency present; `npm ci` removes it).
'use strict';
const { execFile } = require('node:child_process');
const { mkdtemp, readFile, rm, mkdir, access } = require('node:fs/promises');
const os = require('node:os');
const path = require('node:path');
const { promisify } = require('node:util');

const run = promisify(execFile);

/** The prebuilt package @napi-rs/keyring loads on this platform and architecture (its own naming). */
function prebuiltName(platform, arch) {
  const suffix = { darwin: `darwin-${arch}`, win32: `win32-${arch}-msvc`, linux: `linux-${arch}-gnu` }[platform];
  if (!suffix) throw new Error(`keyring prebuilt: no package for ${platform}-${arch}`);
  return `@napi-rs/keyring-${suffix}`;
}

/** electron-builder's Arch enum (builder-util) by value. */
const ARCH_NAMES = ['ia32', 'x64', 'armv7l', 'arm64', 'universal'];

/** @param {{ arch: number; electronPlatformName: string; packager: { info: { appDir: string } } }} ctx */
async function beforePack(ctx) {
  const platform = ctx.electronPlatformName === 'mas' ? 'darwin' : ctx.electronPlatformName;
  const arch = ARCH_NAMES[ctx.arch];
  // A universal mac build merges the x64 and arm64 builds, each packed (and given its prebuilt) first.
  if (arch === 'universal') return;
  await ensurePrebuilt(path.join(ctx.packager.info.appDir, 'node_modules'), platform, arch);
}

/** Makes sure `modules` holds the keyring prebuilt for platform-arch at the pinned version. */
async function ensurePrebuilt(modules, platform, arch) {
  const keyring = JSON.parse(await readFile(path.join(modules, '@napi-rs/keyring/package.json'), 'utf8'));
  const name = prebuiltName(platform, arch);
  const version = keyring.optionalDependencies?.[name];
  if (!version) throw new Error(`keyring prebuilt: @napi-rs/keyring ${keyring.version} has no ${name}`);
  const target = path.join(modules, name);
  const present = await readFile(path.join(target, 'package.json'), 'utf8').then((t) => JSON.parse(t).version === version, () => false);
  if (present) return;
  const scratch = await mkdtemp(path.join(os.tmpdir(), 'airlock-keyring-'));
  try {
    const { stdout } = await run(process.platform === 'win32' ? 'npm.cmd' : 'npm', ['pack', '--silent', `${name}@${version}`, '--pack-destination', scratch], { cwd: scratch, shell: process.platform === 'win32' });
    const tarball = path.join(scratch, stdout.trim().split('\n').pop());
    await access(tarball);
    await rm(target, { recursive: true, force: true });
    await mkdir(target, { recursive: true });
    await run('tar', ['-xzf', tarball, '-C', target, '--strip-components=1']);
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

module.exports = beforePack;
module.exports.default = beforePack;
module.exports.prebuiltName = prebuiltName;
module.exports.ensurePrebuilt = ensurePrebuilt;
