import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AirlockError } from '../../../contracts/errors';
import { checkGuestImage, guestHelperCommand } from './guest-image';

let root: string;

async function put(file: string, target?: string): Promise<void> {
  const at = path.join(root, file);
  await mkdir(path.dirname(at), { recursive: true });
  if (target) await symlink(target, at);
  else await writeFile(at, '');
}

beforeEach(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'airlock-guest-image-'));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('guestHelperCommand', () => {
  it("runs the helper by Airlock's own loader and Node, by absolute path, as the Docker sandbox does", () => {
    expect(guestHelperCommand()).toEqual(['/opt/airlock/lib/ld.so', '--inhibit-cache', '--library-path', '/opt/airlock/lib', '/opt/airlock/node/node', '--openssl-config=/dev/null', '/opt/airlock/helper.js']);
  });
});

describe('checkGuestImage', () => {
  it('accepts a derived image: helper with its Node, setpriv, and perl or python3 on the PATH (symlinks not followed)', async () => {
    await put('opt/airlock/helper.js');
    await put('opt/airlock/node/node');
    await put('opt/airlock/lib/ld.so');
    await put('usr/bin/setpriv');
    // Debian's python3 is a relative symlink; an absolute one would point at the host's file system here.
    await put('usr/local/py/bin/python3', '/usr/bin/python3.11');
    await expect(checkGuestImage(root, 'airlock-env:x', ['PATH=/usr/local/py/bin:/usr/bin'])).resolves.toBeUndefined();
  });

  it('names everything a raw image lacks, and what to do', async () => {
    await put('usr/bin/perl');
    const err = await checkGuestImage(root, 'debian:raw', []).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AirlockError);
    expect((err as AirlockError).kind).toBe('IMAGE_INCOMPATIBLE');
    expect((err as AirlockError).message).toMatch(/^debian:raw cannot boot as an Airlock VM: it lacks Airlock's helper .*; and \/usr\/bin\/setpriv \(util-linux\).*container isolation/);
    expect((err as AirlockError).message).not.toMatch(/perl or python3/);
  });

  it("refuses an image whose helper has no Airlock Node and loader beside it: never the image's node", async () => {
    await put('opt/airlock/helper.js');
    await put('usr/bin/node');
    await put('usr/bin/setpriv');
    await put('usr/bin/perl');
    await expect(checkGuestImage(root, 'img', [])).rejects.toThrow(/lacks Airlock's own Node and loader \(\/opt\/airlock\/node\/node, \/opt\/airlock\/lib\/ld\.so/);
  });

  it('refuses an image with /etc/ld.so.preload, naming it (every glibc loader reads it, as root too)', async () => {
    for (const f of ['opt/airlock/helper.js', 'opt/airlock/node/node', 'opt/airlock/lib/ld.so', 'usr/bin/setpriv', 'usr/bin/perl']) await put(f);
    await expect(checkGuestImage(root, 'img', [])).resolves.toBeUndefined();
    await put('etc/ld.so.preload');
    await expect(checkGuestImage(root, 'img', [])).rejects.toMatchObject({ kind: 'IMAGE_INCOMPATIBLE', message: expect.stringMatching(/^img has \/etc\/ld\.so\.preload/) });
  });

  it('refuses an image with neither perl nor python3 (the RNG reseed of a restored VM)', async () => {
    await put('opt/airlock/helper.js');
    await put('opt/airlock/node/node');
    await put('opt/airlock/lib/ld.so');
    await put('usr/bin/setpriv');
    await expect(checkGuestImage(root, 'img', [])).rejects.toThrow(/lacks perl or python3/);
  });
});
