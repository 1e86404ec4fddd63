/**
 * docs/architecture.md §16, published devcontainer features: a feature published with the reference
 * CLI's own `devcontainer features publish` to a real OCI registry on loopback (Debian's
 * docker-registry) is fetched by the host, pinned by its manifest digest (the plan shows version and
 * digest; trust covers it, so a new version asks again) and installed in the build with its option,
 * containerEnv and lifecycle command; what it asks the sandbox does not grant is named, not applied.
 * Real Docker, the seeded Debian, the scripted fake upstream.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StartRunInput } from '../../contracts/runs';
import { checkRunEnvironment } from '../../core/environment/run-environment';
import { planEnvironment } from '../../core/environment/environment-plan';
import { requirePrerequisite } from '../support/prerequisites';
import { createRunFixture, leftoversOf, type RunFixture } from '../support/run-fixture';
import { hasDockerRegistry, startLoopbackRegistry, type LoopbackRegistry } from '../support/feature-registry';

const docker = await requirePrerequisite('docker');
const registryOk = await hasDockerRegistry();
// Under CI the registry is installed by scripts/ci-setup.sh: a missing one fails instead of skipping.
if (!registryOk && process.env.CI === 'true') throw new Error('docker-registry is not installed (scripts/ci-setup.sh installs it)');

const feature = (version: string) => ({
  'devcontainer-feature.json': JSON.stringify({
    id: 'hello',
    version,
    name: 'hello',
    options: { greeting: { type: 'string', default: 'default-greeting' } },
    containerEnv: { HELLO_FEATURE: `on-${version}` },
    capAdd: ['SYS_PTRACE'],
    postCreateCommand: 'echo feature-setup-ran > /tmp/feature-setup',
  }),
  'install.sh': `#!/bin/sh\nset -e\necho "$GREETING ${version}" > /usr/local/share/hello-greeting\n`,
});

describe.skipIf(!docker.ok || !registryOk)('published devcontainer features (real OCI registry on loopback, real Docker)', () => {
  let f: RunFixture;
  let reg: LoopbackRegistry;
  beforeAll(async () => {
    f = await createRunFixture();
    reg = await startLoopbackRegistry();
  });
  afterAll(async () => {
    await reg?.close();
    await f?.close();
  });

  it('installs a published feature pinned by digest; a new version asks for acceptance again', async () => {
    const digest1 = await reg.publish('hello', feature('1.0.0'));
    const id = `${reg.host}/airlock-test/hello:1`;
    const projectDir = await f.project({
      '.devcontainer/devcontainer.json': JSON.stringify({ image: 'debian:bookworm-slim', features: { [id]: { greeting: 'hi-from-options' } } }),
    });
    const plan = await planEnvironment({ home: f.home, env: process.env }, projectDir, 'devcontainer');
    expect(plan.devcontainer?.problem).toBeUndefined();
    expect(plan.devcontainer?.features).toEqual([expect.objectContaining({ id, local: false, applied: true, version: '1.0.0', digest: digest1 })]);
    expect(plan.devcontainer?.notApplied).toContainEqual(expect.objectContaining({ field: `features["${id}"].capAdd` }));
    expect(plan.devcontainer?.setup[0]).toMatchObject({ hook: 'postCreateCommand', feature: id });

    f.upstream.setScript([
      { toolCalls: [{ name: 'run_command', input: { command: 'echo "greeting=$(cat /usr/local/share/hello-greeting)"; echo "env=$HELLO_FEATURE"; echo "setup=$(cat /tmp/feature-setup)"' } }] },
      { toolCalls: [{ name: 'finish', input: { summary: 'done' } }] },
    ]);
    const started = await f.services.runs.start(StartRunInput.parse({ task: 'use the feature', provider: 'anthropic', model: 'claude-sonnet-4-5', projectDir, environment: 'devcontainer', trustEnvironment: true }));
    const run = await f.core.runs.wait(started.id);
    expect(run.error).toBeUndefined();
    const sent = f.upstream.requests.map((r) => JSON.stringify(r.body)).join('\n');
    expect(sent).toContain('greeting=hi-from-options 1.0.0');
    expect(sent).toContain('env=on-1.0.0');
    expect(sent).toContain('setup=feature-setup-ran');
    expect(run.environment?.notApplied).toContainEqual(expect.objectContaining({ field: `features["${id}"].capAdd` }));
    expect(await leftoversOf(run.id)).toEqual([]);
    await expect(checkRunEnvironment({ home: f.home, env: process.env }, { projectDir, environment: 'devcontainer' })).resolves.toMatchObject({ kind: 'devcontainer' });

    // A new version under the same tag: the accepted content no longer matches.
    const digest2 = await reg.publish('hello', feature('1.0.1'));
    expect(digest2).not.toBe(digest1);
    await expect(checkRunEnvironment({ home: f.home, env: process.env }, { projectDir, environment: 'devcontainer' })).rejects.toMatchObject({ kind: 'FORBIDDEN', message: expect.stringMatching(/changed since you accepted it/) });
    const plan2 = await planEnvironment({ home: f.home, env: process.env }, projectDir, 'devcontainer');
    expect(plan2.devcontainer).toMatchObject({ accepted: 'changed', features: [expect.objectContaining({ version: '1.0.1', digest: digest2 })] });
  }, 600_000);

  it('a feature the registry does not have is a clear error naming it, before anything is built', async () => {
    const id = `${reg.host}/airlock-test/missing:1`;
    const projectDir = await f.project({ '.devcontainer/devcontainer.json': JSON.stringify({ image: 'debian:bookworm-slim', features: { [id]: {} } }) });
    await expect(checkRunEnvironment({ home: f.home, env: process.env }, { projectDir, environment: 'devcontainer', trustEnvironment: true })).rejects.toMatchObject({ kind: 'NOT_FOUND', message: expect.stringContaining(`feature '${id}'`) });
    // `auto` keeps Airlock's image and says why.
    await expect(checkRunEnvironment({ home: f.home, env: process.env }, { projectDir })).resolves.toMatchObject({ kind: 'airlock', skipped: { reason: expect.stringContaining('missing') } });
  }, 120_000);
});
