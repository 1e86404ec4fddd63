import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { craftTar } from '../../test/support/crafted-tar';
import { parseFeatureRef, registryScheme } from './feature-ref';
import { unpackFeature } from './feature-registry';

describe('published feature ids (read as @devcontainers/cli reads them)', () => {
  it('parses registry, path, tag or digest; legacy short ids map to ghcr.io/devcontainers/features at version 1', () => {
    expect(parseFeatureRef('ghcr.io/devcontainers/features/node:1')).toMatchObject({ registry: 'ghcr.io', path: 'devcontainers/features/node', tag: '1', resource: 'ghcr.io/devcontainers/features/node' });
    expect(parseFeatureRef('GHCR.io/Devcontainers/Features/Go')).toMatchObject({ tag: 'latest', path: 'devcontainers/features/go' });
    const d = `sha256:${'a'.repeat(64)}`;
    expect(parseFeatureRef(`ghcr.io/x/y@${d}`)).toMatchObject({ digest: d, path: 'x/y' });
    expect(parseFeatureRef('localhost:5000/airlock-test/hello:1')).toMatchObject({ registry: 'localhost:5000', path: 'airlock-test/hello' });
    expect(parseFeatureRef('node')).toMatchObject({ resource: 'ghcr.io/devcontainers/features/node', tag: '1' });
    expect(parseFeatureRef('golang')).toMatchObject({ resource: 'ghcr.io/devcontainers/features/go' });
    expect(parseFeatureRef('maven')).toMatchObject({ resource: 'ghcr.io/devcontainers/features/java', legacyOptions: { installMaven: true } });
    // Not OCI: local, URLs, the GitHub-release form, unknown short ids, a bad digest.
    for (const id of ['./x', 'https://example.invalid/f.tgz', 'owner/repo/feature@v1', 'nonsense', 'ghcr.io/x/y@sha256:zz']) expect(parseFeatureRef(id)).toBeUndefined();
  });

  it('plain HTTP only for a loopback registry', () => {
    expect(registryScheme('localhost:5000')).toBe('http');
    expect(registryScheme('127.0.0.1:5000')).toBe('http');
    expect(registryScheme('ghcr.io')).toBe('https');
    expect(registryScheme('localhost.example.invalid')).toBe('https');
  });
});

describe('unpacking a feature layer (untrusted)', () => {
  it('reads plain files, gzipped or not', async () => {
    const tar = craftTar([{ name: './', type: '5' }, { name: './install.sh', body: 'echo hi\n' }, { name: './devcontainer-feature.json', body: '{}' }]);
    for (const blob of [tar, gzipSync(tar)]) expect(Object.keys(await unpackFeature('f', blob)).sort()).toEqual(['devcontainer-feature.json', 'install.sh']);
  });

  it('refuses absolute paths, .., links and devices, naming the feature', async () => {
    const cases: Array<[Parameters<typeof craftTar>[0], RegExp]> = [
      [[{ name: '/etc/passwd', body: 'x' }], /outside the feature/],
      [[{ name: '../../x', body: 'x' }], /outside the feature/],
      [[{ name: 'a/../../x', body: 'x' }], /outside the feature/],
      [[{ name: 'link', type: '2', linkname: '/etc/shadow' }], /symlink/],
      [[{ name: 'hard', type: '1', linkname: 'install.sh' }], /link/],
      [[{ name: 'dev', type: '3' }], /character-device/],
    ];
    for (const [entries, re] of cases) await expect(unpackFeature('evil', craftTar(entries))).rejects.toMatchObject({ kind: 'INVALID_INPUT', message: expect.stringMatching(re) });
    await expect(unpackFeature('evil', craftTar([{ name: 'x', body: 'x' }]))).resolves.toBeDefined();
    await expect(unpackFeature('evil', Buffer.from('not a tar at all, just some bytes'.repeat(40)))).rejects.toMatchObject({ message: expect.stringMatching(/Devcontainer feature 'evil'/) });
  });
});
