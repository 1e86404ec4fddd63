/**
 * The sandbox image's architecture on the real engine (docs/architecture.md §4 "Image architecture"):
 * built for what the engine reports, named in the tag, and a build whose arguments name another
 * architecture than the one it runs on (a builder that ignored the platform) stops with a clear error
 * at the Dockerfile's check instead of making an image that cannot start.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BuildProgressParser } from '../../core/sandbox/build-progress';
import { connectEngine, type Engine } from '../../core/sandbox/docker/engine';
import { buildFailure, describeSandboxImage, hostExtraCaCerts } from '../../core/sandbox/image';
import { LABEL_HOST_CA } from '../../core/sandbox/labels';
import { engineArch, type SandboxArch } from '../../core/sandbox/sandbox-arch';
import { requirePrerequisite } from '../support/prerequisites';
import { sandboxImage } from './sandbox-support';

const docker = await requirePrerequisite('docker');

describe.skipIf(!docker.ok)('sandbox image architecture on the Docker engine', () => {
  let engine: Engine;
  let native: SandboxArch;
  let ref: string;

  beforeAll(async () => {
    engine = await connectEngine(process.env);
    native = await engineArch(engine);
    ref = await sandboxImage();
  });
  afterAll(() => engine?.dispose());

  it('builds for the engine’s own architecture and says so in the tag', async () => {
    expect(ref.startsWith(`airlock-sandbox:${native}-`)).toBe(true);
    const inspect = await engine.docker.getImage(ref).inspect();
    expect(inspect.Architecture).toBe(native);
    // How many host CAs it carries, as this machine has them: a devcontainer build adds them to its own steps when any (build-ca.ts).
    expect(inspect.Config?.Labels?.[LABEL_HOST_CA]).toBe(String(Object.keys(await hostExtraCaCerts(process.env)).length));
  });

  it('stops at the Dockerfile’s check when the build arguments name another architecture, leaving no image', async () => {
    const other: SandboxArch = native === 'amd64' ? 'arm64' : 'amd64';
    const { context, buildargs } = await describeSandboxImage({ env: process.env, arch: other });
    const tag = `airlock-sandbox-archcheck:${Date.now()}`;
    // No platform parameter: what a builder does that ignores it (the layers before the check come from the cache).
    const stream = await engine.docker.buildImage((await context()) as unknown as NodeJS.ReadableStream, { t: tag, rm: true, forcerm: true, buildargs });
    const parser = new BuildProgressParser(() => undefined, 'base');
    await new Promise<void>((resolve, reject) => {
      stream.on('data', (c: Buffer) => parser.feed(c.toString('utf8')));
      stream.on('end', resolve);
      stream.on('error', reject);
    });
    parser.end();
    expect(parser.error).toBeDefined();
    const err = buildFailure(parser);
    expect(err.kind).toBe('IMAGE_BUILD_FAILED');
    expect(err.message).toContain(`this build runs on ${native} but was asked for ${other}`);
    await expect(engine.docker.getImage(tag).inspect()).rejects.toMatchObject({ statusCode: 404 });
  });
});
