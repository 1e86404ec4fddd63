/**
 * docs/architecture.md §16, local devcontainer features: a `./name` feature (devcontainer-feature.json
 * + install.sh in the project) is installed into the image before Airlock's runtime is added, with
 * its options as variables and its containerEnv; the agent's commands use what it installed, as uid
 * 1000. A failing install.sh fails the run before any model call, naming the feature. Published
 * features: environment-published-features.test.ts. Real Docker, the seeded Debian, the scripted fake upstream.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AirlockError } from '../../contracts/errors';
import { StartRunInput } from '../../contracts/runs';
import type { ScriptedTurn } from '../fixtures/fake-upstream';
import { requirePrerequisite } from '../support/prerequisites';
import { createRunFixture, leftoversOf, type RunFixture } from '../support/run-fixture';

const docker = await requirePrerequisite('docker');

const FEATURE_JSON = JSON.stringify({
  id: 'hello',
  version: '1.0.0',
  options: { greeting: { type: 'string', default: 'hello' }, count: { type: 'string', default: '3' } },
  containerEnv: { HELLO_HOME: '/opt/hello' },
});
const INSTALL = `#!/bin/sh
set -e
mkdir -p /opt/hello
printf '#!/bin/sh\\necho "%s from the feature (count %s)"\\n' "$GREETING" "$COUNT" > /usr/local/bin/hello
chmod 755 /usr/local/bin/hello
id -u > /opt/hello/installed-by
`;

describe.skipIf(!docker.ok)('local devcontainer features (real Docker, fake upstream)', () => {
  let f: RunFixture;
  beforeAll(async () => {
    f = await createRunFixture();
  });
  afterAll(async () => {
    await f?.close();
  });

  const start = (projectDir: string, turns: ScriptedTurn[]) => {
    f.upstream.setScript(turns);
    return f.services.runs.start(StartRunInput.parse({ task: 'use the tool', provider: 'anthropic', model: 'claude-sonnet-4-5', projectDir, trustEnvironment: true }));
  };

  it("installs a local feature into the derived image; the agent's commands use it", async () => {
    const projectDir = await f.project({
      '.devcontainer/devcontainer.json': JSON.stringify({ image: 'debian:bookworm-slim', features: { './hello': { greeting: 'hi there' } } }),
      '.devcontainer/hello/devcontainer-feature.json': FEATURE_JSON,
      '.devcontainer/hello/install.sh': INSTALL,
    });
    const started = await start(projectDir, [
      { toolCalls: [{ name: 'run_command', input: { command: 'hello; echo "home=$HELLO_HOME"; echo "installed-by=$(cat /opt/hello/installed-by)"; echo "runs-as=$(id -u)"' } }] },
      { toolCalls: [{ name: 'finish', input: { summary: 'done' } }] },
    ]);
    const run = await f.core.runs.wait(started.id);
    expect(run.error).toBeUndefined();
    const sent = f.upstream.requests.map((r) => JSON.stringify(r.body)).join('\n');
    // The user's option over the feature's default, the default where none was given, its containerEnv.
    expect(sent).toContain('hi there from the feature (count 3)');
    expect(sent).toContain('home=/opt/hello');
    expect(sent).toContain('installed-by=0');
    expect(sent).toContain('runs-as=1000');
    expect(run.environment?.baseImage).toMatch(/^airlock-env-base:features-/);
    expect(await leftoversOf(run.id)).toEqual([]);
  }, 600_000);

  it('a failing install.sh fails the run naming the feature, before any model call; a missing local feature is named', async () => {
    const calls = f.upstream.requests.length;
    const failing = await f.project({
      '.devcontainer/devcontainer.json': JSON.stringify({ image: 'debian:bookworm-slim', features: { './broken': {} } }),
      '.devcontainer/broken/devcontainer-feature.json': '{"id":"broken"}',
      '.devcontainer/broken/install.sh': '#!/bin/sh\necho feature-went-wrong\nexit 7\n',
    });
    const failed = await f.core.runs.wait((await start(failing, [])).id);
    expect(failed.status).toBe('failed');
    expect(failed.error?.kind).toBe('IMAGE_BUILD_FAILED');
    expect(failed.error?.message).toMatch(/feature '\.\/broken'[\s\S]*feature-went-wrong/);
    expect(f.upstream.requests.length).toBe(calls);
    expect(await leftoversOf(failed.id)).toEqual([]);

    const missing = await f.project({ '.devcontainer.json': JSON.stringify({ image: 'debian:bookworm-slim', features: { './nope': {} } }) });
    const e2 = await start(missing, []).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((e2 as AirlockError).message).toMatch(/feature '\.\/nope' is not a folder of the project/);
  }, 600_000);

  it('installs features in installsAfter/dependsOn order, not the order written; a cycle is refused naming it before anything is built', async () => {
    // Written as toolchain-user, toolchain: the user's install.sh needs what the toolchain's installed.
    const projectDir = await f.project({
      '.devcontainer/devcontainer.json': JSON.stringify({ image: 'debian:bookworm-slim', features: { './uses-tool': {}, './lint': {}, './toolchain': {} } }),
      '.devcontainer/uses-tool/devcontainer-feature.json': JSON.stringify({ id: 'uses-tool', installsAfter: ['lint'], dependsOn: { toolchain: {} } }),
      '.devcontainer/uses-tool/install.sh': '#!/bin/sh\nset -e\n[ -x /usr/local/bin/toolchain ] || { echo "the toolchain is not installed yet"; exit 9; }\necho uses-tool >> /opt/feature-order\ntoolchain > /opt/uses-tool-saw\n',
      '.devcontainer/lint/devcontainer-feature.json': JSON.stringify({ id: 'lint' }),
      '.devcontainer/lint/install.sh': '#!/bin/sh\necho lint >> /opt/feature-order\n',
      '.devcontainer/toolchain/devcontainer-feature.json': JSON.stringify({ id: 'toolchain' }),
      '.devcontainer/toolchain/install.sh': "#!/bin/sh\nset -e\nprintf '#!/bin/sh\\necho toolchain-answer\\n' > /usr/local/bin/toolchain\nchmod 755 /usr/local/bin/toolchain\necho toolchain >> /opt/feature-order\n",
    });
    const started = await start(projectDir, [
      { toolCalls: [{ name: 'run_command', input: { command: 'echo "order=$(tr "\\n" , < /opt/feature-order)"; echo "saw=$(cat /opt/uses-tool-saw)"' } }] },
      { toolCalls: [{ name: 'finish', input: { summary: 'done' } }] },
    ]);
    const run = await f.core.runs.wait(started.id);
    expect(run.error).toBeUndefined();
    const sent = f.upstream.requests.map((r) => JSON.stringify(r.body)).join('\n');
    // lint keeps its place before toolchain (both free); uses-tool moves after both.
    expect(sent).toContain('order=lint,toolchain,uses-tool,');
    expect(sent).toContain('saw=toolchain-answer');

    const calls = f.upstream.requests.length;
    const cyclic = await f.project({
      '.devcontainer/devcontainer.json': JSON.stringify({ image: 'debian:bookworm-slim', features: { './a': {}, './b': {} } }),
      '.devcontainer/a/devcontainer-feature.json': JSON.stringify({ id: 'a', installsAfter: ['b'] }),
      '.devcontainer/a/install.sh': 'true\n',
      '.devcontainer/b/devcontainer-feature.json': JSON.stringify({ id: 'b', dependsOn: { a: {} } }),
      '.devcontainer/b/install.sh': 'true\n',
    });
    const err = await start(cyclic, []).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(AirlockError);
    expect((err as AirlockError).kind).toBe('INVALID_INPUT');
    expect((err as AirlockError).message).toMatch(/features '\.\/a' → '\.\/b' → '\.\/a' name each other in installsAfter\/dependsOn/);
    expect(f.upstream.requests.length).toBe(calls);
  }, 600_000);
});
