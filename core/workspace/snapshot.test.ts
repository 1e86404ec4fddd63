import { existsSync, lstatSync, readFileSync, readlinkSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { snapshotProject } from './snapshot';
import { cleanupTemps, fingerprint, gitRepo, localSandbox, tempDir, writeTree, testGit } from '../../test/support/workspace-fixtures';

afterAll(cleanupTemps);

const KEY = `-----BEGIN OPENSSH PRIVATE KEY-----\n${'b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW'.repeat(3)}\n-----END OPENSSH PRIVATE KEY-----\n`;

describe('snapshotProject', () => {
  it('leaves out credentials, honours nested .gitignore and lists every exclusion with a reason', async () => {
    const dir = gitRepo({
      'README.md': '# demo\n',
      '.gitignore': 'dist/\n*.log\n!keep.log\n',
      'dist/bundle.js': 'x',
      'app.log': 'noise',
      'keep.log': 'kept by negation',
      'pkg/.gitignore': 'generated.txt\n',
      'pkg/generated.txt': 'gen',
      'pkg/src/main.ts': 'export {}\n',
      '.env': 'API_KEY=sk-live-123',
      '.env.production': 'X=1',
      'deploy/id_rsa': 'secret',
      'deploy/id_rsa.pub': 'ssh-rsa AAAA public',
      'certs/server.pem': 'pem',
      'certs/tls.key': 'key',
      '.npmrc': '//registry.example.test/:_authToken=npm_abcdef\n',
      'sub/.npmrc': 'save-exact=true\n',
      '.pypirc': '[pypi]\nusername = __token__\npassword = pypi-AgEIcHlwaS5vcmc\n',
      '.aws/credentials': '[default]\naws_access_key_id=AKIA\n',
      'home/.netrc': 'machine x login y password z\n',
      '.git-credentials': 'https://u:p@example.invalid\n',
      '.docker/config.json': '{"auths":{}}',
      'config/gcp.json': '{"type":"service_account","private_key":"-----BEGIN","client_email":"a@b"}',
      'notes/key.txt': KEY,
      'src/parser.ts': 'const marker = "-----BEGIN RSA PRIVATE KEY-----"; // a string, not a key\n',
    });
    const snap = await snapshotProject(testGit, dir);
    const sb = await localSandbox(dir);
    const excluded = Object.fromEntries(sb.hydrated.excluded.map((e) => [e.path, e.kind]));
    expect(excluded).toMatchObject({
      '.git/': 'git',
      'dist/': 'gitignore',
      'app.log': 'gitignore',
      'pkg/generated.txt': 'gitignore',
      '.env': 'secret',
      '.env.production': 'secret',
      'deploy/id_rsa': 'secret',
      'certs/server.pem': 'secret',
      'certs/tls.key': 'secret',
      '.npmrc': 'secret',
      '.pypirc': 'secret',
      '.aws/credentials': 'secret',
      'home/.netrc': 'secret',
      '.git-credentials': 'secret',
      '.docker/config.json': 'secret',
      'config/gcp.json': 'secret',
      'notes/key.txt': 'secret',
    });
    for (const e of sb.hydrated.excluded) expect(e.reason.length).toBeGreaterThan(5);
    for (const rel of ['README.md', 'keep.log', 'pkg/src/main.ts', 'sub/.npmrc', 'deploy/id_rsa.pub', 'src/parser.ts']) {
      expect(existsSync(sb.at(rel)), rel).toBe(true);
    }
    for (const rel of Object.keys(excluded)) expect(existsSync(sb.at(rel)), rel).toBe(false);
    expect(snap.isGit).toBe(true);
    expect(snap.headCommit).toMatch(/^[0-9a-f]{40}$/);
  });

  it('include overrides default exclusions and .gitignore; exclude adds patterns', async () => {
    const dir = tempDir();
    writeTree(dir, { '.gitignore': 'build/\n', 'build/keep/config.json': '{}', 'build/other.js': 'x', '.env.example': 'A=', 'docs/big.bin': 'b', 'src/a.ts': 'a' });
    const sb = await localSandbox(dir, { include: ['.env.example', 'build/keep/config.json'], exclude: ['docs/'] });
    expect(existsSync(sb.at('.env.example'))).toBe(true);
    expect(existsSync(sb.at('build/keep/config.json'))).toBe(true);
    expect(existsSync(sb.at('build/other.js'))).toBe(false);
    expect(existsSync(sb.at('docs/big.bin'))).toBe(false);
    expect(sb.hydrated.excluded).toContainEqual(expect.objectContaining({ path: 'docs/', kind: 'option' }));
  });

  it('keeps symlinks as links and never reads through one that leaves the project', async () => {
    const outside = tempDir('airlock-outside-');
    writeTree(outside, { 'secret.txt': 'TOP-SECRET-OUTSIDE' });
    const dir = tempDir();
    writeTree(dir, {
      'real/file.txt': 'inside\n',
      'inner-link': { symlink: 'real/file.txt' },
      'escape-file': { symlink: path.join(outside, 'secret.txt') },
      'escape-dir': { symlink: outside },
      'run.sh': { content: '#!/bin/sh\n', mode: 0o755 },
      'private.txt': { content: 'p', mode: 0o600 },
    });
    const sb = await localSandbox(dir);
    expect(lstatSync(sb.at('inner-link')).isSymbolicLink()).toBe(true);
    expect(readlinkSync(sb.at('inner-link'))).toBe('real/file.txt');
    expect(lstatSync(sb.at('escape-dir')).isSymbolicLink()).toBe(true);
    expect(lstatSync(sb.at('escape-file')).isSymbolicLink()).toBe(true);
    expect(lstatSync(sb.at('run.sh')).mode & 0o777).toBe(0o755);
    expect(lstatSync(sb.at('private.txt')).mode & 0o777).toBe(0o600);
    // Nothing of the outside folder travelled: not in the manifest, not in the baseline.
    expect(sb.hydrated.manifest.map((f) => f.path).sort()).toEqual(['escape-dir', 'escape-file', 'inner-link', 'private.txt', 'real/file.txt', 'run.sh']);
    const tarBytes: Buffer[] = [];
    const again = (await snapshotProject(testGit, dir)).open();
    for await (const c of again.tar) tarBytes.push(c as Buffer);
    await again.manifest;
    expect(Buffer.concat(tarBytes).includes('TOP-SECRET-OUTSIDE')).toBe(false);
  });

  it('lists files above the size cap instead of dropping them silently', async () => {
    const dir = tempDir();
    writeTree(dir, { 'small.txt': 'ok', 'huge.bin': Buffer.alloc(4096, 1) });
    const sb = await localSandbox(dir, { maxFileBytes: 1024 });
    const big = sb.hydrated.excluded.find((e) => e.path === 'huge.bin');
    expect(big?.kind).toBe('too-large');
    expect(big?.reason).toMatch(/4\.0 KiB exceeds the 1\.0 KiB cap/);
    expect(existsSync(sb.at('huge.bin'))).toBe(false);
    expect(readFileSync(sb.at('small.txt'), 'utf8')).toBe('ok');
  });

  it('copies long, unicode and odd names exactly (PAX headers through the in-sandbox converter)', async () => {
    const long = `${'deep/'.repeat(30)}${'n'.repeat(120)}.txt`;
    const dir = tempDir();
    writeTree(dir, { [long]: 'long\n', 'ünïcødé – 名前.md': 'u\n', 'tab\tand\nnewline.txt': 't\n', 'link-long': { symlink: long } });
    const sb = await localSandbox(dir);
    expect(readFileSync(sb.at(long), 'utf8')).toBe('long\n');
    expect(readFileSync(sb.at('ünïcødé – 名前.md'), 'utf8')).toBe('u\n');
    expect(readFileSync(sb.at('tab\tand\nnewline.txt'), 'utf8')).toBe('t\n');
    expect(readlinkSync(sb.at('link-long'))).toBe(long);
    expect(sb.hydrated.files).toBe(4);
  });

  it('never writes the project', async () => {
    const dir = gitRepo({ 'a.txt': 'a\n', 'b/c.txt': 'c\n', '.env': 'X=1', 'l': { symlink: 'a.txt' } });
    const before = fingerprint(dir);
    await localSandbox(dir);
    expect(fingerprint(dir)).toBe(before);
  });

  it('lists entries in sorted depth-first order with each file’s own size, though a folder’s lstats run concurrently', async () => {
    const dir = tempDir();
    const spec: Record<string, string> = {};
    // Sizes unrelated to names: a stat result paired with the wrong name would show.
    for (let i = 0; i < 300; i++) spec[`big/f${String(i).padStart(3, '0')}.txt`] = 'x'.repeat((i * 7919) % 1000);
    spec['a/z/deep.txt'] = 'deep';
    spec['a/b.txt'] = 'bb';
    spec['c.txt'] = 'c';
    writeTree(dir, spec);
    const snap = await snapshotProject(testGit, dir);
    const expected = ['a', 'a/b.txt', 'a/z', 'a/z/deep.txt', 'big', ...Array.from({ length: 300 }, (_, i) => `big/f${String(i).padStart(3, '0')}.txt`), 'c.txt'];
    expect(snap.entries.map((e) => e.path)).toEqual(expected);
    for (const e of snap.entries) if (e.type === 'file') expect(e.size).toBe(Buffer.byteLength(spec[e.path] as string));
    const { manifest } = snap.open();
    expect((await manifest).map((f) => f.path)).toEqual(expected.filter((p) => p in spec));
  });

  it('refuses a missing project folder with a typed error', async () => {
    await expect(snapshotProject(testGit, '/nonexistent/airlock-project')).rejects.toMatchObject({ kind: 'NOT_FOUND' });
  });
});
