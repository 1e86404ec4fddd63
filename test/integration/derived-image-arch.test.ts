/**
 * A project's image of another architecture than the sandbox's (docs/architecture.md §4 "Image
 * architecture", §16): Airlock's runtime copied into it would be of the wrong architecture, so the
 * derivation refuses it up front, naming both, before tagging or building anything. The foreign
 * image is a real one in the real engine (an image archive whose config says so, loaded like
 * scripts/arm64-check.sh loads its arm64 Debian); nothing of it runs, so no emulation is needed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pack } from 'tar-stream';
import { createHash } from 'node:crypto';
import { connectEngine, type Engine } from '../../core/sandbox/docker/engine';
import { BASE_REPOSITORY, deriveSandboxImage } from '../../core/environment/derived-image';
import { engineArch } from '../../core/sandbox/sandbox-arch';
import { requirePrerequisite } from '../support/prerequisites';
import { sandboxImage } from './sandbox-support';

const docker = await requirePrerequisite('docker');

async function tarOf(entries: Array<{ name: string; body: Buffer }>): Promise<Buffer> {
  const p = pack();
  const chunks: Buffer[] = [];
  p.on('data', (c: unknown) => chunks.push(c as Buffer));
  const done = new Promise<void>((resolve, reject) => {
    p.on('end', resolve);
    p.on('error', reject);
  });
  for (const e of entries) p.entry({ name: e.name, mode: 0o644, mtime: new Date(0) }, e.body);
  p.finalize();
  await done;
  return Buffer.concat(chunks);
}

/** A one-layer image archive (`docker save` format) whose config names `arch`. */
async function foreignImageArchive(tag: string, arch: string): Promise<Buffer> {
  const layer = await tarOf([{ name: 'etc/os-release', body: Buffer.from('ID=debian\n') }]);
  const diffId = createHash('sha256').update(layer).digest('hex');
  const config = Buffer.from(JSON.stringify({ architecture: arch, os: 'linux', config: { Cmd: ['bash'] }, rootfs: { type: 'layers', diff_ids: [`sha256:${diffId}`] } }));
  const configName = `${createHash('sha256').update(config).digest('hex')}.json`;
  const manifest = Buffer.from(JSON.stringify([{ Config: configName, RepoTags: [tag], Layers: ['layer/layer.tar'] }]));
  return tarOf([
    { name: 'manifest.json', body: manifest },
    { name: configName, body: config },
    { name: 'layer/layer.tar', body: layer },
  ]);
}

describe.skipIf(!docker.ok)('a project image of another architecture than the sandbox (real Docker)', () => {
  let engine: Engine;
  let airlockRef: string;
  const tag = `airlock-test-foreign-arch:${process.pid}-${Date.now()}`;
  let other: string;

  beforeAll(async () => {
    engine = await connectEngine(process.env);
    airlockRef = await sandboxImage(engine);
    other = (await engineArch(engine)) === 'amd64' ? 'arm64' : 'amd64';
    const stream = await engine.docker.loadImage((await foreignImageArchive(tag, other)) as unknown as NodeJS.ReadableStream);
    await new Promise<void>((resolve, reject) => {
      stream.on('end', resolve);
      stream.on('error', reject);
      stream.resume();
    });
  });
  afterAll(async () => {
    await engine?.docker
      .getImage(tag)
      .remove({ force: true })
      .catch(() => undefined);
    engine?.dispose();
  });

  it('is refused before anything is built, naming both architectures and what to do', async () => {
    const inspect = await engine.docker.getImage(tag).inspect();
    expect(inspect.Architecture).toBe(other);
    const err = await deriveSandboxImage(engine.docker, { baseRef: tag, airlockRef, emit: () => undefined, what: 'the devcontainer of .devcontainer/devcontainer.json' }).then(
      () => undefined,
      (e: unknown) => e as { kind?: string; message?: string; field?: string },
    );
    expect(err?.kind).toBe('IMAGE_INCOMPATIBLE');
    expect(err?.field).toBe('environment');
    expect(err?.message).toContain(`is built for ${other}, but the sandbox here runs`);
    // Nothing was tagged for a build: the refusal came first.
    const pinned = `${BASE_REPOSITORY}:${inspect.Id.replace(/^sha256:/, '').slice(0, 20)}`;
    await expect(engine.docker.getImage(pinned).inspect()).rejects.toMatchObject({ statusCode: 404 });
  });
});
