import { cp, mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadKeyring } from './native-keyring';

const here = path.dirname(new URL(import.meta.url).pathname);
const installed = path.join(here, '..', '..', 'node_modules', '@napi-rs', 'keyring');

describe('the keychain binding, loaded on first use', () => {
  const dirs: string[] = [];
  afterAll(() => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));

  it('loads this machine’s binding', async () => {
    const k = await loadKeyring();
    expect(typeof k.AsyncEntry).toBe('function');
  });

  it('names the missing architecture when the app was packaged without its binding (the real loader, without its platform package)', async () => {
    // What a dmg/nsis for the other architecture holds: @napi-rs/keyring's loader, but only the build host's native package — here none.
    const dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-keyring-arch-'));
    dirs.push(dir);
    await mkdir(path.join(dir, 'node_modules', '@napi-rs'), { recursive: true });
    await cp(installed, path.join(dir, 'node_modules', '@napi-rs', 'keyring'), { recursive: true });
    await expect(loadKeyring(path.join(dir, 'main.js'))).rejects.toMatchObject({
      kind: 'KEYCHAIN_UNAVAILABLE',
      message: expect.stringMatching(new RegExp(`no keychain module for ${process.platform}-${process.arch} \\(Cannot find native binding.*built for this computer`)),
    });
  });
});
