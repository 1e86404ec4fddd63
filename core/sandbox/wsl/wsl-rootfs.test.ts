import { PassThrough, Readable } from 'node:stream';
import { extract, pack } from 'tar-stream';
import { describe, expect, it } from 'vitest';
import { prepareWslRootfs, WSL_CONF, WSL_DISTRIBUTION_CONF, WSL_HOSTS } from './wsl-rootfs';

async function tarOf(entries: Array<{ name: string; body?: string; mode?: number; uid?: number; type?: 'file' | 'directory' | 'symlink'; linkname?: string }>): Promise<Buffer> {
  const p = pack();
  for (const e of entries) p.entry({ name: e.name, mode: e.mode ?? 0o644, uid: e.uid ?? 0, gid: e.uid ?? 0, type: e.type ?? 'file', linkname: e.linkname }, e.body ?? '');
  p.finalize();
  const chunks: Buffer[] = [];
  for await (const c of p) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

async function entriesOf(tar: Buffer): Promise<Map<string, { body: string; mode?: number; uid?: number; type?: string; linkname?: string | null }>> {
  const out = new Map<string, { body: string; mode?: number; uid?: number; type?: string; linkname?: string | null }>();
  const ex = extract();
  ex.on('entry', (h, stream, next) => {
    const chunks: Buffer[] = [];
    stream.on('data', (c: unknown) => chunks.push(c as Buffer));
    stream.on('end', () => {
      out.set(h.name, { body: Buffer.concat(chunks).toString('utf8'), mode: h.mode, uid: h.uid, type: h.type, linkname: h.linkname });
      next();
    });
  });
  await new Promise<void>((resolve, reject) => {
    ex.on('finish', resolve);
    ex.on('error', reject);
    Readable.from([tar]).pipe(ex);
  });
  return out;
}

describe('prepareWslRootfs (runs here: a real tar through tar-stream)', () => {
  it('refuses an image with /etc/ld.so.preload, naming it (every glibc loader reads it, the root helper\'s too)', async () => {
    const input = await tarOf([{ name: 'etc/', type: 'directory', mode: 0o755 }, { name: 'etc/ld.so.preload', body: '/hostile/hook.so\n' }, { name: 'opt/airlock/helper.js', body: 'x' }]);
    const sink = new PassThrough();
    sink.resume();
    await expect(prepareWslRootfs(Readable.from([input]), sink)).rejects.toMatchObject({ kind: 'IMAGE_INCOMPATIBLE', message: expect.stringMatching(/\/etc\/ld\.so\.preload/) });
  });

  it('copies every entry unchanged and installs wsl.conf with automount and interop off', async () => {
    const input = await tarOf([
      { name: 'etc/', type: 'directory', mode: 0o755 },
      { name: 'etc/wsl.conf', body: '[automount]\nenabled = true\n' },
      { name: 'home/airlock/.profile', body: 'x', uid: 1000, mode: 0o600 },
      { name: 'usr/bin/sh', type: 'symlink', linkname: 'dash' },
    ]);
    const out = new PassThrough();
    const chunks: Buffer[] = [];
    out.on('data', (c: Buffer) => chunks.push(c));
    await prepareWslRootfs(Readable.from([input]), out, { busybox: Buffer.from('BUSYBOX') });
    const entries = await entriesOf(Buffer.concat(chunks));
    expect(entries.get('home/airlock/.profile')).toMatchObject({ body: 'x', uid: 1000, mode: 0o600 });
    expect(entries.get('usr/bin/sh')).toMatchObject({ type: 'symlink', linkname: 'dash' });
    expect(entries.get('etc/wsl.conf')?.body).toBe(WSL_CONF);
    expect(entries.get('opt/airlock-vm/busybox')).toMatchObject({ body: 'BUSYBOX', mode: 0o755 });
    // The image's own wsl.conf (automount on) is replaced, not kept beside ours.
    expect([...entries.keys()].filter((n) => n === 'etc/wsl.conf')).toHaveLength(1);
    expect(WSL_CONF).toMatch(/\[automount\]\nenabled = false\nmountFsTab = false/);
    expect(WSL_CONF).toMatch(/\[interop\]\nenabled = false\nappendWindowsPath = false/);
  });

  it('turns off WSLg, the GPU, the Start-menu shortcut and the Terminal profile, and gives localhost a name', async () => {
    // `docker export` leaves /etc/hosts empty (Docker mounts its own at run time).
    const input = await tarOf([{ name: 'etc/', type: 'directory', mode: 0o755 }, { name: 'etc/hosts', body: '' }, { name: 'etc/wsl-distribution.conf', body: '[shortcut]\nenabled = true\n' }]);
    const out = new PassThrough();
    const chunks: Buffer[] = [];
    out.on('data', (c: Buffer) => chunks.push(c));
    await prepareWslRootfs(Readable.from([input]), out);
    const entries = await entriesOf(Buffer.concat(chunks));
    // The keys WSL's init reads (microsoft/WSL src/linux/init/WslDistributionConfig.h, main.cpp).
    expect(WSL_CONF).toMatch(/\[general\]\nguiApplications = false/);
    expect(WSL_CONF).toMatch(/\[gpu\]\nenabled = false/);
    expect(entries.get('etc/wsl-distribution.conf')?.body).toBe(WSL_DISTRIBUTION_CONF);
    expect(WSL_DISTRIBUTION_CONF).toMatch(/\[shortcut\]\nenabled = false\n\n\[windowsterminal\]\nenabled = false/);
    expect(entries.get('etc/hosts')?.body).toBe(WSL_HOSTS);
    expect(WSL_HOSTS).toMatch(/^127\.0\.0\.1\tlocalhost$/m);
    expect([...entries.keys()].filter((n) => n === 'etc/hosts' || n === 'etc/wsl-distribution.conf')).toHaveLength(2);
    // No busybox unless given: the image's own ip brings lo up.
    expect(entries.has('opt/airlock-vm/busybox')).toBe(false);
  });

  it("makes /airlock root's and unwritable by the agent's user, whatever the image says, and adds it when missing", async () => {
    // An image (say an older or derived one) that left Airlock's state to the agent's user.
    const input = await tarOf([
      { name: 'airlock/', type: 'directory', mode: 0o777, uid: 1000 },
      { name: 'airlock/baseline.git/', type: 'directory', mode: 0o775, uid: 1000 },
      { name: 'airlock/baseline.git/HEAD', body: 'ref: refs/heads/main\n', mode: 0o666, uid: 1000 },
      { name: 'workspace/', type: 'directory', mode: 0o755, uid: 1000 },
    ]);
    const out = new PassThrough();
    const chunks: Buffer[] = [];
    out.on('data', (c: Buffer) => chunks.push(c));
    await prepareWslRootfs(Readable.from([input]), out);
    const entries = await entriesOf(Buffer.concat(chunks));
    expect(entries.get('airlock/')).toMatchObject({ type: 'directory', uid: 0, mode: 0o755 });
    expect(entries.get('airlock/baseline.git/')).toMatchObject({ uid: 0, mode: 0o755 });
    expect(entries.get('airlock/baseline.git/HEAD')).toMatchObject({ uid: 0, mode: 0o644, body: 'ref: refs/heads/main\n' });
    expect([...entries.keys()].filter((n) => n === 'airlock/')).toHaveLength(1);
    // The agent's own work tree stays the agent's.
    expect(entries.get('workspace/')).toMatchObject({ uid: 1000, mode: 0o755 });

    const bare = new PassThrough();
    const bareChunks: Buffer[] = [];
    bare.on('data', (c: Buffer) => bareChunks.push(c));
    await prepareWslRootfs(Readable.from([await tarOf([{ name: 'etc/', type: 'directory', mode: 0o755 }])]), bare);
    expect((await entriesOf(Buffer.concat(bareChunks))).get('airlock/')).toMatchObject({ type: 'directory', uid: 0, mode: 0o755 });
  });
});
