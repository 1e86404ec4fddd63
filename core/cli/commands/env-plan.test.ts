import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { captureIo } from '../../../test/support/cli-io';
import type { EnvironmentPlan } from '../../environment/environment-plan';
import { ExitCode } from '../command';
import { main } from '../main';

let home: string;
const dirs: string[] = [];
beforeAll(async () => {
  home = await mkdtemp(path.join(os.tmpdir(), 'airlock-plan-home-'));
});
afterAll(async () => {
  for (const d of [home, ...dirs]) await rm(d, { recursive: true, force: true });
});

async function project(files: Record<string, string>): Promise<string> {
  const d = await mkdtemp(path.join(os.tmpdir(), 'airlock-plan-'));
  dirs.push(d);
  for (const [name, content] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(d, name)), { recursive: true });
    await writeFile(path.join(d, name), content);
  }
  return d;
}

async function cli(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const { io, out, err } = captureIo({ AIRLOCK_HOME: home, PATH: process.env.PATH, DOCKER_HOST: 'unix:///nonexistent/airlock-plan-test.sock' });
  const code = await main(argv, io);
  return { code, out: out(), err: err() };
}

const CONFIG = {
  name: 'web',
  build: { dockerfile: 'Dockerfile', args: { VARIANT: '20' } },
  features: { './tool': { version: '2' }, 'localhost:1/airlock-test/go:1': {} },
  containerEnv: { APP_ENV: 'dev' },
  remoteEnv: { EXTRA: '1' },
  forwardPorts: [3000],
  runArgs: ['--privileged'],
  onCreateCommand: 'echo create',
  postCreateCommand: { deps: 'npm ci', lint: ['npm', 'run', 'lint'] },
};

/** docs/architecture.md §16, "The plan": `airlock env plan` shows what a run would use, before any run, read on the host. */
describe('airlock env plan', () => {
  it('prints the build, features, setup in order with user and folder, env, ports, what is not applied, and acceptance', async () => {
    const dir = await project({
      'package.json': '{"name":"p"}',
      '.devcontainer/devcontainer.json': JSON.stringify(CONFIG),
      '.devcontainer/Dockerfile': 'FROM debian:bookworm-slim\n',
      '.devcontainer/tool/devcontainer-feature.json': '{"id":"tool","version":"1.0.0"}',
      '.devcontainer/tool/install.sh': '#!/bin/sh\n',
    });
    const json = await cli('env', 'plan', dir, '--environment', 'devcontainer', '--json');
    expect(json.code).toBe(ExitCode.ok);
    const plan = JSON.parse(json.out) as EnvironmentPlan & { prepared?: { status: string } };
    expect(plan.uses).toBe('devcontainer:.devcontainer/devcontainer.json');
    const d = plan.devcontainer;
    expect(d?.accepted).toBe('untrusted');
    expect(d?.build).toEqual({ kind: 'dockerfile', dockerfile: '.devcontainer/Dockerfile', context: '.devcontainer', args: { VARIANT: '20' } });
    expect(d?.features.map((f) => [f.id, f.applied])).toEqual([
      ['./tool', true],
      ['localhost:1/airlock-test/go:1', false],
    ]);
    expect(d?.problem).toMatch(/the registry localhost:1 is unreachable/);
    expect(d?.setup.map((s) => `${s.hook}${s.name ? `.${s.name}` : ''}: ${s.command} | ${s.cwd} | ${s.parallel}`)).toEqual([
      'onCreateCommand: echo create | /workspace | false',
      'postCreateCommand.deps: npm ci | /workspace | true',
      'postCreateCommand.lint: npm run lint | /workspace | true',
    ]);
    expect(d?.setup[0]?.user).toMatch(/^uid 1000/);
    expect(d?.setupNetwork).toEqual({ presets: ['npm'], impliedBy: ['package.json'] });
    expect(d?.env).toEqual({ APP_ENV: 'dev', EXTRA: '1' });
    expect(d?.ports).toEqual([3000]);
    expect(d?.notApplied.map((n) => n.field)).toContain('runArgs');
    // Nothing to prepare from without an engine: said, not failed.
    expect(plan.prepared?.status).toBe('unknown');

    const human = await cli('env', 'plan', dir, '--environment', 'devcontainer');
    expect(human.code).toBe(ExitCode.ok);
    expect(human.out).toContain('not accepted yet');
    expect(human.out).toContain('build: .devcontainer/Dockerfile in context .devcontainer, args VARIANT=20');
    expect(human.out).toMatch(/1\. onCreateCommand: echo create {3}as uid 1000 .* in \/workspace/);
    expect(human.out).toContain('feature localhost:1/airlock-test/go:1: not applied:');
    expect(human.out).toContain('not applied: runArgs:');
  });

  it("under auto, shows the fallback to Airlock's image and why, with the configuration still described", async () => {
    const dir = await project({ '.devcontainer.json': JSON.stringify({ image: 'debian:bookworm-slim', postCreateCommand: 'make' }) });
    const plan = JSON.parse((await cli('env', 'plan', dir, '--json')).out) as EnvironmentPlan;
    expect(plan.uses).toBe('airlock');
    expect(plan.fallback).toEqual({ config: '.devcontainer.json', reason: expect.stringMatching(/^not used, Airlock's own image ran instead: it is not accepted yet/) });
    expect(plan.devcontainer?.build).toEqual({ kind: 'image', image: 'debian:bookworm-slim' });
    const broken = await project({ '.devcontainer.json': '{ "image": ' });
    const b = JSON.parse((await cli('env', 'plan', broken, '--json')).out) as EnvironmentPlan;
    expect(b.uses).toBe('airlock');
    expect(b.fallback?.reason).toMatch(/\.devcontainer\.json:1:/);
    // Chosen explicitly, the error is the command's.
    const explicit = await cli('env', 'plan', broken, '--environment', 'devcontainer');
    expect(explicit.code).not.toBe(ExitCode.ok);
    expect(explicit.err).toMatch(/\.devcontainer\.json:1:/);
  });
});
