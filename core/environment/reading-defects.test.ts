import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadDevcontainer } from './devcontainer-config';
import { containerEnvironment } from './devcontainer-variables';
import { setupPlan } from './setup-plan';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function project(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'airlock-read-'));
  dirs.push(dir);
  for (const [rel, content] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, rel)), { recursive: true });
    await writeFile(path.join(dir, rel), content);
  }
  return dir;
}

/** Read as the reference (`@devcontainers/cli`) reads them (docs/architecture.md §16, "What is applied"). */
describe('devcontainer reading, as the reference reads it', () => {
  it('build.dockerfile "../Dockerfile" with no context builds in the Dockerfile\'s folder', async () => {
    const dir = await project({ 'Dockerfile': 'FROM debian:bookworm-slim\n', '.devcontainer/devcontainer.json': '{"build":{"dockerfile":"../Dockerfile"}}' });
    const cfg = await loadDevcontainer(dir, '.devcontainer/devcontainer.json', { env: process.env });
    expect(cfg.source).toEqual({ kind: 'build', dockerfile: 'Dockerfile', context: '', args: {} });
    const nested = await project({ '.devcontainer/docker/Dockerfile': 'FROM x\n', '.devcontainer/devcontainer.json': '{"build":{"dockerfile":"docker/Dockerfile"}}' });
    expect((await loadDevcontainer(nested, '.devcontainer/devcontainer.json', { env: process.env })).source).toMatchObject({ dockerfile: '.devcontainer/docker/Dockerfile', context: '.devcontainer/docker' });
    // A context written in the file still wins.
    const given = await project({ 'Dockerfile': 'FROM x\n', '.devcontainer/devcontainer.json': '{"build":{"dockerfile":"../Dockerfile","context":"."}}' });
    expect((await loadDevcontainer(given, '.devcontainer/devcontainer.json', { env: process.env })).source).toMatchObject({ context: '.devcontainer' });
  });

  it("the project's container folder written out in a command or a variable names the same file under /workspace", async () => {
    const dir = await project({
      '.devcontainer/devcontainer.json': JSON.stringify({
        dockerComposeFile: 'compose.yml',
        service: 'dev',
        workspaceFolder: '/workspaces/app',
        postStartCommand: 'node /workspaces/app/tool.mjs && ls /workspacesX /srv/workspaces',
        remoteEnv: { TOOLS: '/workspaces/app/bin:/usr/bin' },
      }),
      '.devcontainer/compose.yml': 'services:\n  dev:\n    image: x\n    volumes:\n      - ..:/workspaces:cached\n',
    });
    const cfg = await loadDevcontainer(dir, '.devcontainer/devcontainer.json', { env: process.env });
    expect(cfg.workFolder).toBe('/workspace/app');
    expect(cfg.lifecycle.postStartCommand).toEqual([{ argv: ['/bin/sh', '-c', 'node /workspace/app/tool.mjs && ls /workspacesX /srv/workspaces'] }]);
    expect(cfg.remoteEnv).toEqual({ TOOLS: '/workspace/app/bin:/usr/bin' });
  });

  it('postAttachCommand runs last in setup; overrideCommand: false is named', async () => {
    const dir = await project({ '.devcontainer.json': JSON.stringify({ image: 'x', postAttachCommand: 'echo attached', postStartCommand: 'echo started', overrideCommand: false }) });
    const cfg = await loadDevcontainer(dir, '.devcontainer.json', { env: process.env });
    expect((await setupPlan(dir, cfg))?.hooks.map((h) => h.hook)).toEqual(['postStartCommand', 'postAttachCommand']);
    expect(cfg.notApplied.map((n) => n.field)).toContain('overrideCommand');
    const kept = await project({ '.devcontainer.json': '{"image":"x","overrideCommand":true}' });
    expect((await loadDevcontainer(kept, '.devcontainer.json', { env: process.env })).notApplied).toEqual([]);
  });

  it('text inside customizations (VS Code only) gives no ${localEnv} notice', async () => {
    const dir = await project({ '.devcontainer.json': JSON.stringify({ image: 'x', customizations: { vscode: { settings: { 'terminal.integrated.env.linux': { TOKEN: '${localEnv:GITHUB_TOKEN}' } } } } }) });
    expect((await loadDevcontainer(dir, '.devcontainer.json', { env: { GITHUB_TOKEN: 'secret' } })).notApplied).toEqual([]);
    const used = await project({ '.devcontainer.json': JSON.stringify({ image: 'x', containerEnv: { T: '${localEnv:GITHUB_TOKEN}' } }) });
    expect((await loadDevcontainer(used, '.devcontainer.json', { env: process.env })).notApplied.map((n) => n.field)).toEqual(['${localEnv:GITHUB_TOKEN}']);
  });

  it("a local feature's privileged, capAdd, securityOpt, init and mounts are named as not applied", async () => {
    const dir = await project({
      '.devcontainer/devcontainer.json': '{"image":"x","features":{"./dind":{}}}',
      '.devcontainer/dind/devcontainer-feature.json': JSON.stringify({ id: 'dind', privileged: true, capAdd: ['SYS_ADMIN'], securityOpt: ['seccomp=unconfined'], init: true, mounts: [{ source: 'dind-var', target: '/var/lib/docker', type: 'volume' }] }),
      '.devcontainer/dind/install.sh': '#!/bin/sh\n',
    });
    const cfg = await loadDevcontainer(dir, '.devcontainer/devcontainer.json', { env: process.env });
    expect(cfg.notApplied.map((n) => n.field)).toEqual(['features["./dind"].privileged', 'features["./dind"].capAdd', 'features["./dind"].securityOpt', 'features["./dind"].init', 'features["./dind"].mounts']);
  });

  it('several compose files merge as compose does: environment key by key, build paths from the file that wrote them; pass-through variables named', async () => {
    const dir = await project({
      '.devcontainer/devcontainer.json': JSON.stringify({ dockerComposeFile: ['../compose.yml', 'compose.extend.yml'], service: 'app' }),
      'compose.yml': 'services:\n  app:\n    build: { context: ., dockerfile: app.Dockerfile }\n    environment:\n      DB_HOST: db\n      DB_PORT: "5432"\n  db:\n    image: postgres\n',
      'app.Dockerfile': 'FROM x\n',
      '.devcontainer/compose.extend.yml': 'services:\n  app:\n    environment:\n      - DB_PORT=6543\n      - HOST_TOKEN\n',
    });
    const cfg = await loadDevcontainer(dir, '.devcontainer/devcontainer.json', { env: process.env });
    const src = cfg.source;
    if (src.kind !== 'compose') throw new Error('compose expected');
    expect(src.workspace.environment).toEqual({ DB_HOST: 'db', DB_PORT: '6543' });
    expect(src.workspace.source).toMatchObject({ kind: 'build', context: '', dockerfile: 'app.Dockerfile' });
    expect(cfg.notApplied).toContainEqual({ field: 'services.app.environment HOST_TOKEN', reason: expect.stringMatching(/pass-through variables/) });
  });

  it('${containerEnv:PATH} is kept as written when read and extends the image\'s own PATH in the run', async () => {
    const dir = await project({ '.devcontainer.json': JSON.stringify({ image: 'x', containerEnv: { TOOLS: '${containerEnv:HOME}/tools' }, remoteEnv: { PATH: '${containerEnv:PATH}:/opt/x', T: '${containerEnv:TOOLS}', D: '${containerEnv:NOPE:dflt}' }, postCreateCommand: 'echo ${containerEnv:PATH}' }) });
    const cfg = await loadDevcontainer(dir, '.devcontainer.json', { env: process.env });
    // As the reference prints it: resolved only where the container's environment is known.
    expect(cfg.remoteEnv.PATH).toBe('${containerEnv:PATH}:/opt/x');
    expect(cfg.lifecycle.postCreateCommand?.[0]?.argv[2]).toBe('echo ${containerEnv:PATH}');
    const env = containerEnvironment({ PATH: '/usr/local/bin:/usr/bin', HOME: '/home/dev' }, cfg.containerEnv, cfg.remoteEnv);
    expect(env).toMatchObject({ PATH: '/usr/local/bin:/usr/bin:/opt/x', TOOLS: '/home/dev/tools', T: '/home/dev/tools', D: 'dflt' });
  });

  it('a workspaceFolder inside the project is the folder setup runs in, and ${containerWorkspaceFolder} points there', async () => {
    const dir = await project({ '.devcontainer/devcontainer.json': JSON.stringify({ image: 'x', workspaceFolder: '/workspaces/${localWorkspaceFolderBasename}/web', postCreateCommand: 'cd ${containerWorkspaceFolder} && ls ${containerWorkspaceFolderBasename}' }) });
    const cfg = await loadDevcontainer(dir, '.devcontainer/devcontainer.json', { env: process.env });
    expect(cfg.workFolder).toBe('/workspace/web');
    expect((await setupPlan(dir, cfg))?.cwd).toBe('/workspace/web');
    expect(cfg.lifecycle.postCreateCommand?.[0]?.argv[2]).toBe('cd /workspace/web && ls web');
    expect(cfg.notApplied).toEqual([]);
    // The default folder is the project's; one outside it is named.
    expect((await loadDevcontainer(await project({ '.devcontainer.json': '{"image":"x"}' }), '.devcontainer.json', { env: process.env })).workFolder).toBe('/workspace');
    const outside = await loadDevcontainer(await project({ '.devcontainer.json': '{"image":"x","workspaceFolder":"/src"}' }), '.devcontainer.json', { env: process.env });
    expect(outside.workFolder).toBe('/workspace');
    expect(outside.notApplied.map((n) => n.field)).toEqual(['workspaceFolder']);
  });

  it("a compose file's volume tells where the project is: workspaceFolder under it maps into the sandbox", async () => {
    const dir = await project({
      '.devcontainer/devcontainer.json': JSON.stringify({ dockerComposeFile: 'compose.yml', service: 'app', workspaceFolder: '/workspaces/${localWorkspaceFolderBasename}/api' }),
      '.devcontainer/compose.yml': 'services:\n  app:\n    image: x\n    volumes:\n      - ../..:/workspaces:cached\n',
    });
    const cfg = await loadDevcontainer(dir, '.devcontainer/devcontainer.json', { env: process.env });
    expect(cfg.workFolder).toBe('/workspace/api');
    expect(cfg.notApplied.map((n) => n.field)).toEqual(['services.app.volumes']);
  });

  it('remoteUser and containerUser are named: setup and the agent run as uid 1000', async () => {
    const cfg = await loadDevcontainer(await project({ '.devcontainer.json': '{"image":"x","remoteUser":"vscode","containerUser":"root"}' }), '.devcontainer.json', { env: process.env });
    expect(cfg.notApplied.map((n) => n.field)).toEqual(['remoteUser', 'containerUser']);
  });
});
