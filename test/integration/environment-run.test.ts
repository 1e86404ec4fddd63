/**
 * docs/architecture.md §16: runs in the project's own environment, on a real engine with the
 * scripted fake upstream. A Go project's devcontainer (Go, no Node) and an image whose default user is
 * root both become hardened sandboxes, and the agent's commands' output reaches the model; bad
 * environments are refused with what to do, before anything is left behind.
 */
import { access, readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AirlockError } from '../../contracts/errors';
import { StartRunInput } from '../../contracts/runs';
import { connectEngine } from '../../core/sandbox/docker/engine';
import { buildContextTar } from '../../core/sandbox/image';
import { engineBuild } from '../../core/environment/engine-build';
import type { ScriptedTurn } from '../fixtures/fake-upstream';
import { NODELESS_DOCKERFILE, nodelessImage } from '../support/environment-images';
import { requirePrerequisite } from '../support/prerequisites';
import { createRunFixture, FAKE_PACKAGE, FAKE_REGISTRY_HOST, fakeRegistryProject, filesContaining, leftoversOf, startFakeRegistry, type FakeRegistry, type RunFixture } from '../support/run-fixture';

const docker = await requirePrerequisite('docker');

const GO_PROJECT = {
  'go.mod': 'module example.com/calc\n\ngo 1.19\n',
  'calc.go': 'package calc\n\n// Add returns a + b.\nfunc Add(a, b int) int { return a - b }\n',
  'calc_test.go': 'package calc\n\nimport "testing"\n\nfunc TestAdd(t *testing.T) {\n\tif got := Add(2, 3); got != 5 {\n\t\tt.Fatalf("Add(2, 3) = %d, want 5", got)\n\t}\n}\n',
};
/** Debian's own Node (a different build and version from the helper's official one). */
const DEBIAN_NODE_DOCKERFILE = 'FROM debian:bookworm-slim\nRUN apt-get update && apt-get install -y --no-install-recommends nodejs && rm -rf /var/lib/apt/lists/*\n';
const HOST_SECRET = 'host-secret-canary-5b1e0c';

function script(command: string): ScriptedTurn[] {
  return [{ toolCalls: [{ name: 'run_command', input: { command } }] }, { toolCalls: [{ name: 'finish', input: { summary: 'ran it' } }] }];
}

async function failure(p: Promise<unknown>): Promise<AirlockError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(AirlockError);
  return err as AirlockError;
}

describe.skipIf(!docker.ok)('project environments (real Docker, fake upstream)', () => {
  let f: RunFixture;
  const hostMarker = path.join(os.tmpdir(), `airlock-initialize-${process.pid}`);

  beforeAll(async () => {
    f = await createRunFixture({ env: { AIRLOCK_TEST_SECRET: HOST_SECRET } });
    // The devcontainer below builds this same Dockerfile: Airlock's build then reuses the engine's layer cache.
    await nodelessImage();
  });
  afterAll(async () => {
    await f?.close();
  });

  /** What the model was sent, over all its requests (tool results carry command output). */
  const sentToModel = () => f.upstream.requests.map((r) => JSON.stringify(r.body)).join('\n');

  async function start(input: Partial<StartRunInput> & { projectDir: string }, turns: ScriptedTurn[]) {
    f.upstream.setScript(turns);
    return f.services.runs.start(StartRunInput.parse({ task: 'fix the failing test', provider: 'anthropic', model: 'claude-sonnet-4-5', ...input }));
  }

  it("a Go project's devcontainer (Go, no Node): trusted first, then `go test` runs and its output reaches the model", async () => {
    const projectDir = await f.project({
      ...GO_PROJECT,
      '.devcontainer/devcontainer.json': `// Go, as the project uses it
{
  "name": "calc",
  "build": { "dockerfile": "Dockerfile" },
  "containerEnv": { "WS_NAME": "\${containerWorkspaceFolderBasename}", "LEAK": "\${localEnv:AIRLOCK_TEST_SECRET}" },
  "initializeCommand": "touch ${hostMarker}",
  "runArgs": ["--network=host"],
  "mounts": ["source=/,target=/host,type=bind"],
}
`,
      '.devcontainer/Dockerfile': NODELESS_DOCKERFILE,
    });
    const base = { projectDir, environment: 'devcontainer' };
    const before = (await f.services.runs.list({})).length;
    const untrusted = await failure(start(base, []));
    expect(untrusted.kind).toBe('FORBIDDEN');
    expect(untrusted.message).toMatch(/not trusted yet: \.devcontainer\/devcontainer\.json builds \.devcontainer\/Dockerfile.*--trust-environment/);
    expect((await f.services.runs.list({})).length).toBe(before);

    const started = await start({ ...base, trustEnvironment: true }, script('command -v node || echo no-node; echo "ws=$WS_NAME leak=[$LEAK]"; id -u; go test ./... 2>&1; echo "go-exit=$?"'));
    const run = await f.core.runs.wait(started.id);
    expect(run.error).toBeUndefined();
    expect(run.status).toBe('done');

    const sent = sentToModel();
    expect(sent).toContain('no-node');
    expect(sent).toContain('ws=workspace leak=[]');
    expect(sent).toContain('Add(2, 3) = -1, want 5');
    // JSON-escaped: the tab of `FAIL\texample.com/calc` as go test prints it.
    expect(sent).toContain('FAIL\\texample.com/calc');
    expect(sent).toContain('go-exit=1');

    // The record names the environment and the image that ran, and what was not applied.
    const env = run.environment;
    expect(env?.name).toBe('devcontainer:.devcontainer/devcontainer.json');
    const engine = await connectEngine(process.env);
    expect(env?.imageId).toBe((await engine.docker.getImage(env?.image ?? '').inspect()).Id);
    expect(run.sandbox.image).toBe(env?.image);
    expect(env?.notApplied.map((n) => n.field)).toEqual(['initializeCommand', 'runArgs', 'mounts', '${localEnv:AIRLOCK_TEST_SECRET}']);
    const audit = await readFile(f.core.store.paths(run.id).audit, 'utf8');
    expect(audit).toContain(`environment devcontainer:.devcontainer/devcontainer.json; image ${env?.image} (${env?.imageId})`);
    // initializeCommand never ran on the host; the host variable never left it.
    await expect(access(hostMarker)).rejects.toThrow();
    expect(await filesContaining(f.home, HOST_SECRET)).toEqual([]);
    expect(await leftoversOf(run.id)).toEqual([]);

    // Accepted content runs again without asking; a changed Dockerfile asks again.
    const { writeFile } = await import('node:fs/promises');
    await writeFile(path.join(projectDir, '.devcontainer/Dockerfile'), `${NODELESS_DOCKERFILE}RUN echo changed\n`);
    const changed = await failure(start(base, []));
    expect(changed.message).toMatch(/changed since you accepted it/);
  });

  it("a Node project whose devcontainer brings another Node than Airlock's own: the project's runs its tests", async () => {
    const projectDir = await f.project({
      'package.json': '{"name":"n","version":"1.0.0","private":true}\n',
      'test.js': "const assert = require('node:assert');\nassert.strictEqual([1, 2, 3].at(-1), 2, 'last element');\n",
      '.devcontainer/devcontainer.json': JSON.stringify({ build: { dockerfile: 'Dockerfile' } }),
      '.devcontainer/Dockerfile': DEBIAN_NODE_DOCKERFILE,
    });
    const started = await start({ projectDir, trustEnvironment: true }, script(`echo "project-node=$(node -p 'process.execPath + " shared=" + process.config.variables.node_shared')"; echo "airlock-node=$(/opt/airlock/node/node -p 'process.execPath + " shared=" + process.config.variables.node_shared')"; node test.js 2>&1; echo "node-exit=$?"`));
    const run = await f.core.runs.wait(started.id);
    expect(run.error).toBeUndefined();
    const sent = sentToModel();
    // Debian's nodejs (its own build, on Debian's shared libnode), not the official build Airlock's
    // helper and agent run on. (Debian 12 ships the same 18.x line here; the builds differ.)
    expect(sent).toContain('project-node=/usr/bin/node shared=true');
    expect(sent).toMatch(/airlock-node=\/opt\/airlock\/node\/\S* shared=false/);
    expect(sent).toContain('last element');
    expect(sent).toContain('node-exit=1');
  });

  it('an image whose default user is root runs as uid 1000 with a writable home, hardened', async () => {
    const engine = await connectEngine(process.env);
    expect((await engine.docker.getImage('debian:bookworm-slim').inspect()).Config.User || 'root').toBe('root');
    const projectDir = await f.project(GO_PROJECT);
    const started = await start({ projectDir, environment: 'image:debian:bookworm-slim' }, script('id -u; echo "home=$HOME"; touch "$HOME/probe" && echo home-writable; touch /usr/probe 2>/dev/null || echo root-read-only; command -v node || echo no-node'));
    let inspect: { User: string; CapDrop: string[] | null; CapAdd: string[]; ReadonlyRootfs: boolean; NetworkMode: string } | undefined;
    const look = async () => {
      const [c] = await engine.docker.listContainers({ filters: { label: [`airlock.run=${started.id}`] } });
      if (!c) return;
      const i = await engine.docker.getContainer(c.Id).inspect();
      inspect = { User: i.Config.User, CapDrop: i.HostConfig.CapDrop ?? null, CapAdd: [...(i.HostConfig.CapAdd ?? [])].sort(), ReadonlyRootfs: i.HostConfig.ReadonlyRootfs ?? false, NetworkMode: i.HostConfig.NetworkMode ?? '' };
    };
    let looked: Promise<void> | undefined;
    const sub = f.services.runs.onDidChangeStatus((s) => {
      if (s.id === started.id && s.status === 'running' && !looked) looked = look();
    });
    const run = await f.core.runs.wait(started.id);
    sub.dispose();
    await looked;
    expect(run.error).toBeUndefined();
    const sent = sentToModel();
    expect(sent).toMatch(/1000\\nhome=\/home\/airlock\\nhome-writable\\nroot-read-only\\nno-node/);
    expect(run.environment).toMatchObject({ name: 'image:debian:bookworm-slim', kind: 'image', baseImage: 'debian:bookworm-slim', notApplied: [] });
    // The helper is root with its four capabilities; the agent's commands are uid 1000 with none (the output above; §2.3).
    expect(inspect).toEqual({ User: '0:0', CapDrop: ['ALL'], CapAdd: ['KILL', 'SETGID', 'SETUID'], ReadonlyRootfs: true, NetworkMode: 'none' });
  });

  it('refuses bad environments with a clear message and leaves nothing half-made', async () => {
    const before = (await f.services.runs.list({})).length;
    const malformed = await f.project({ '.devcontainer.json': '{\n  "image": "x"\n  "name": "y"\n}\n' });
    // Chosen explicitly (`auto` keeps Airlock's image for a configuration nobody accepted: auto-fallback.test.ts).
    expect((await failure(start({ projectDir: malformed, environment: 'devcontainer' }, []))).message).toMatch(/^\.devcontainer\.json:3:3: comma expected/);
    const noDockerfile = await f.project({ '.devcontainer/devcontainer.json': '{"build":{"dockerfile":"Dockerfile"}}' });
    expect((await failure(start({ projectDir: noDockerfile, trustEnvironment: true }, []))).message).toMatch(/build\.dockerfile '\.devcontainer\/Dockerfile' does not exist/);
    const withFeature = await f.project({ '.devcontainer.json': '{"image":"debian:bookworm-slim","features":{"localhost:1/airlock-test/go:1":{}}}' });
    expect((await failure(start({ projectDir: withFeature, trustEnvironment: true }, []))).message).toMatch(/feature 'localhost:1\/airlock-test\/go:1': the registry localhost:1 is unreachable/);
    expect((await f.services.runs.list({})).length).toBe(before);

    // A failing build: the run fails before any model call, with the build's log.
    const calls = f.upstream.requests.length;
    const failing = await f.project({ '.devcontainer/devcontainer.json': '{"build":{"dockerfile":"Dockerfile"}}', '.devcontainer/Dockerfile': 'FROM debian:bookworm-slim\nRUN echo boom-from-the-build && exit 3\n' });
    const failed = await f.core.runs.wait((await start({ projectDir: failing, trustEnvironment: true }, [])).id);
    expect(failed.status).toBe('failed');
    expect(failed.error?.kind).toBe('IMAGE_BUILD_FAILED');
    expect(failed.error?.message).toMatch(/step \d+\/\d+ \(RUN echo boom-from-the-build && exit 3\)[\s\S]*boom-from-the-build/);
    expect(await leftoversOf(failed.id)).toEqual([]);

    // An image with no shell cannot host the runtime: refused by the derive step itself.
    const engine = await connectEngine(process.env);
    await engineBuild(engine.docker, { tag: 'airlock-test-noshell:1', context: await buildContextTar(Buffer.from('FROM scratch\nCOPY payload/ /\n'), { files: { 'hello.txt': Buffer.from('hi\n') }, hash: '' }), what: 'a shell-less image', emit: () => undefined }, (x) => new AirlockError('IMAGE_BUILD_FAILED', x.error));
    const noShell = await f.core.runs.wait((await start({ projectDir: await f.project(GO_PROJECT), environment: 'image:airlock-test-noshell:1' }, [])).id);
    expect(noShell.error?.kind).toBe('IMAGE_INCOMPATIBLE');
    expect(noShell.error?.message).toMatch(/no POSIX shell at \/bin\/sh/);
    expect(await leftoversOf(noShell.id)).toEqual([]);
    // A musl (Alpine-style) image: there is no Alpine image here, so Debian with musl's loader where the check looks.
    await engineBuild(engine.docker, { tag: 'airlock-test-musl:1', context: await buildContextTar(Buffer.from('FROM debian:bookworm-slim\nRUN touch /lib/ld-musl-x86_64.so.1\n')), what: 'a musl-looking image', emit: () => undefined }, (x) => new AirlockError('IMAGE_BUILD_FAILED', x.error));
    const musl = await f.core.runs.wait((await start({ projectDir: await f.project(GO_PROJECT), environment: 'image:airlock-test-musl:1' }, [])).id);
    expect(musl.error?.kind).toBe('IMAGE_INCOMPATIBLE');
    expect(musl.error?.message).toMatch(/it is built on musl libc \(Alpine-style\); Airlock's runtime needs glibc/);
    expect(await leftoversOf(musl.id)).toEqual([]);
    // Neither left a derived image behind.
    for (const base of ['airlock-test-noshell:1', 'airlock-test-musl:1']) {
      const id = (await engine.docker.getImage(base).inspect()).Id;
      expect(await engine.docker.listImages({ filters: { label: [`airlock.derived-from=${id}`] } })).toEqual([]);
    }
    expect(f.upstream.requests.length).toBe(calls);
  });
});

describe.skipIf(!docker.ok)('the setup phase (real Docker, a local registry stand-in, fake upstream)', () => {
  let f: RunFixture;
  let registry: FakeRegistry;
  let airlockImage: string;

  beforeAll(async () => {
    registry = await startFakeRegistry();
    f = await createRunFixture({ egressProxy: registry.egressProxy });
    // Airlock's own image has npm: the devcontainer names it as any project would name its image.
    airlockImage = await f.core.image('base');
  });
  afterAll(async () => {
    // What setup left is kept as a prepared environment (§16): this installation's go with it.
    await f?.services.environments.prune({}).catch(() => undefined);
    await f?.close();
    await registry?.close();
  });

  function nodeProject(postCreateCommand: string) {
    return f.project({
      ...fakeRegistryProject(registry),
      '.devcontainer/devcontainer.json': JSON.stringify({ image: airlockImage, postCreateCommand }),
    });
  }

  it('postCreateCommand installs through the allowlist before the agent, without the run token; its changes are not the agent\'s work', async () => {
    const projectDir = await nodeProject(`npm install --no-audit --no-fund ${FAKE_PACKAGE.name} && echo "token=[$ANTHROPIC_API_KEY]"`);
    f.upstream.setScript(script(`test -f node_modules/${FAKE_PACKAGE.name}/package.json && echo installed-by-setup; test -f package-lock.json && echo lock-present; echo "hi" > agent.txt`));
    const started = await f.services.runs.start(
      StartRunInput.parse({ projectDir, task: 't', provider: 'anthropic', model: 'claude-sonnet-4-5', trustEnvironment: true, setupAllowlist: [`${FAKE_REGISTRY_HOST}:${registry.port}`] }),
    );
    const run = await f.core.runs.wait(started.id);
    expect(run.error).toBeUndefined();
    expect(registry.requests).toContainEqual({ host: `${FAKE_REGISTRY_HOST}:${registry.port}`, path: `/${FAKE_PACKAGE.name}` });
    const sent = f.upstream.requests.map((r) => JSON.stringify(r.body)).join('\n');
    expect(sent).toContain('installed-by-setup');
    expect(sent).toContain('lock-present');
    // Review shows only what the agent changed: setup's package.json edit and lock file are the baseline.
    expect(run.changedFiles.map((c) => `${c.status} ${c.path}`)).toEqual(['added agent.txt']);
    const log = await f.terminalLog(run.id);
    expect(log).toContain('── Setup (.devcontainer/devcontainer.json) ──');
    expect(log).toContain('token=[]');
    const audit = await readFile(f.core.store.paths(run.id).audit, 'utf8');
    expect(audit).toMatch(/setup: postCreateCommand from \.devcontainer\/devcontainer\.json; network allowlist .*registry\.airlock\.test.*\(implied by package\.json\)/);
  });

  it("as the reference runs it: setup in workspaceFolder (a folder of the project), ${containerEnv:PATH} extends the image's PATH, and the agent's login shell sees the same PATH", async () => {
    const projectDir = await f.project({
      'web/index.js': 'console.log(1)\n',
      '.devcontainer/devcontainer.json': JSON.stringify({
        image: airlockImage,
        workspaceFolder: '/workspaces/${localWorkspaceFolderBasename}/web',
        remoteEnv: { PATH: '${containerEnv:PATH}:/opt/extra/bin', HERE: '${containerWorkspaceFolder}' },
        postCreateCommand: 'echo "setup-cwd=$(pwd) setup-path=$PATH here=$HERE" > setup.txt',
      }),
    });
    const image = (await f.core.engine().then((e) => e.docker.getImage(airlockImage).inspect())).Config?.Env?.find((e) => e.startsWith('PATH='))?.slice(5);
    expect(image).toMatch(/\/usr\/bin/);
    // The agent's `bash -lc` reads Debian's /etc/profile, which sets PATH outright: the environment's PATH is put back after it.
    f.upstream.setScript(script('cat web/setup.txt; echo "agent-path=$PATH"'));
    const started = await f.services.runs.start(StartRunInput.parse({ projectDir, task: 't', provider: 'anthropic', model: 'claude-sonnet-4-5', trustEnvironment: true }));
    const run = await f.core.runs.wait(started.id);
    expect(run.error).toBeUndefined();
    const sent = f.upstream.requests.map((r) => JSON.stringify(r.body)).join('\n');
    expect(sent).toContain(`setup-cwd=/workspace/web setup-path=${image}:/opt/extra/bin here=/workspace/web`);
    expect(sent).toContain(`agent-path=${image}:/opt/extra/bin\\n`);
  });

  it('a failing setup command ends the run before any model call, with its status and output', async () => {
    const projectDir = await nodeProject('echo setup-went-wrong >&2; exit 7');
    const calls = f.upstream.requests.length;
    f.upstream.setScript(script('echo never'));
    const started = await f.services.runs.start(StartRunInput.parse({ projectDir, task: 't', provider: 'anthropic', model: 'claude-sonnet-4-5', trustEnvironment: true }));
    const run = await f.core.runs.wait(started.id);
    expect(run.status).toBe('failed');
    expect(run.error?.message).toMatch(/^Setup failed: postCreateCommand \(echo setup-went-wrong >&2; exit 7\) exited with status 7\. The agent was not started[\s\S]*setup-went-wrong/);
    expect(f.upstream.requests.length).toBe(calls);
    expect(await leftoversOf(run.id)).toEqual([]);
  });
});
