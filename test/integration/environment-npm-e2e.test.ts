/**
 * docs/architecture.md §16, end to end: a real npm package as published (concat-map@0.0.1, its
 * tarball and its devDependencies' as `npm pack` wrote them, test/fixtures/npm-concat-map) with one
 * injected bug, and a Debian-based devcontainer whose `postCreateCommand` is `npm install`. The
 * registry is reached over TLS signed by a company CA the host trusts (a stand-in on 127.0.0.1 with a
 * test CA, as a re-signing proxy would present it), and that CA is the host's extra CA of Airlock's
 * image. Setup installs; the agent runs the package's own test script with no network, sees the
 * failure, fixes the file, sees it pass; the second run starts from the prepared environment.
 * Real engine, real egress proxy, the scripted fake upstream.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StartRunInput } from '../../contracts/runs';
import type { ScriptedTurn } from '../fixtures/fake-upstream';
import { airlockImageWithCa, CONCAT_MAP_BUGGY, CONCAT_MAP_CORRECT, concatMapProject, makeTestCa, NPM_FIXTURE, startTlsRegistry, TLS_REGISTRY_HOST, type TlsRegistry } from '../support/https-npm-registry';
import { requirePrerequisite } from '../support/prerequisites';
import { createRunFixture, exec, leftoversOf, type RunFixture } from '../support/run-fixture';
import { sandboxImage } from './sandbox-support';

const docker = await requirePrerequisite('docker');
const LABEL = `environment-npm-e2e-${process.pid}`;
const TEST = 'npm test 2>&1; echo "test-exit=$?"';
const NO_NET = `node -e "require('https').get(process.env.npm_config_registry + 'concat-map', (r) => console.log('net-status=' + r.statusCode)).on('error', (e) => console.log('net-error=' + e.code))"`;

describe.skipIf(!docker.ok)('a published npm package in its devcontainer behind a TLS-intercepting proxy (real Docker, fake upstream)', () => {
  let f: RunFixture;
  let registry: TlsRegistry;
  let caDir: string;
  let airlockWithCa: string;
  const made: string[] = [];

  beforeAll(async () => {
    caDir = await mkdtemp(path.join(os.tmpdir(), 'airlock-npm-ca-'));
    const ca = await makeTestCa(caDir, TLS_REGISTRY_HOST);
    registry = await startTlsRegistry(NPM_FIXTURE, ca);
    f = await createRunFixture({ egressProxy: registry.egressProxy });
    // The host's extra CA is the test CA: Airlock's image carries it, and the derive step takes it from there.
    airlockWithCa = await airlockImageWithCa(await sandboxImage(), ca.caPem, `airlock-test-npm-ca-runtime:${process.pid}`, LABEL);
    f.core.image = async () => airlockWithCa;
  }, 900_000);
  afterAll(async () => {
    await f?.close();
    await registry?.close();
    for (const ref of made) await exec('docker', ['rmi', '-f', ref]).catch(() => undefined);
    if (airlockWithCa) await exec('docker', ['rmi', '-f', airlockWithCa]).catch(() => undefined);
    if (caDir) await rm(caDir, { recursive: true, force: true });
  });

  async function run(projectDir: string, script: ScriptedTurn[]) {
    f.upstream.setScript(script);
    const started = await f.services.runs.start(
      StartRunInput.parse({ projectDir, task: 'make the tests pass', provider: 'anthropic', model: 'claude-sonnet-4-5', environment: 'devcontainer', trustEnvironment: true, setupAllowlist: [`${TLS_REGISTRY_HOST}:${registry.port}`] }),
    );
    const done = await f.core.runs.wait(started.id);
    expect(done.error).toBeUndefined();
    expect(done.status).toBe('done');
    return done;
  }
  const lastRequest = () => JSON.stringify(f.upstream.requests.at(-1)?.body ?? {});

  it('setup installs the devDependencies over TLS the host trusts; the agent sees the failure offline, fixes it, sees it pass; the next run starts prepared', { timeout: 1_800_000 }, async () => {
    const projectDir = await f.project(await concatMapProject(registry.url));

    const first = await run(projectDir, [
      { toolCalls: [{ name: 'run_command', input: { command: `${TEST}; ${NO_NET}` } }] },
      { toolCalls: [{ name: 'edit_file', input: { path: 'index.js', old_text: CONCAT_MAP_BUGGY, new_text: CONCAT_MAP_CORRECT } }] },
      { toolCalls: [{ name: 'run_command', input: { command: TEST } }] },
      { toolCalls: [{ name: 'finish', input: { summary: 'fixed concatMap' } }] },
    ]);
    // Setup fetched the package's devDependencies (tape and its six) from the TLS registry stand-in.
    for (const name of ['tape', 'deep-equal', 'defined', 'inherits', 'jsonify', 'resumer', 'through']) expect(registry.requests).toContain(`/${name}`);
    expect(registry.requests.filter((r) => r.endsWith('.tgz'))).toHaveLength(7);
    const terminal1 = await f.terminalLog(first.id);
    expect(terminal1).toContain('[setup] postCreateCommand');
    expect(terminal1).toMatch(/added 7 packages/);
    expect(first.environment?.image).toMatch(/^airlock-env:/);
    expect(first.environment?.prepared?.status).toBe('created');
    made.push(first.environment?.prepared?.image ?? '');

    // The agent: its own test script fails on the injected bug, there is no network, the fix makes it pass.
    const sent = lastRequest();
    const failed = sent.indexOf('test-exit=1');
    const passed = sent.indexOf('test-exit=0');
    expect(failed).toBeGreaterThan(-1);
    expect(passed).toBeGreaterThan(failed);
    expect(sent).toContain('not ok');
    expect(sent).toMatch(/# pass {1,2}5/);
    expect(sent).toMatch(/net-error=(ENOTFOUND|EAI_AGAIN|ECONNREFUSED)/);
    expect(sent).not.toMatch(/net-status=\d/);
    expect(first.changedFiles.map((c) => `${c.status} ${c.path}`)).toEqual(['modified index.js']);

    // The second run: from the prepared environment, setup not run, nothing fetched; the installed tape runs.
    const fetched = registry.requests.length;
    const second = await run(projectDir, [
      { toolCalls: [{ name: 'run_command', input: { command: TEST } }] },
      { toolCalls: [{ name: 'finish', input: { summary: 'looked' } }] },
    ]);
    expect(second.environment?.prepared).toEqual({ status: 'reused', key: first.environment?.prepared?.key, image: first.environment?.prepared?.image });
    const terminal2 = await f.terminalLog(second.id);
    expect(terminal2).not.toContain('[setup] postCreateCommand');
    expect(terminal2).toContain('starting from the prepared environment');
    expect(registry.requests.length).toBe(fetched);
    // The host's project still has the bug (the first run's fix was not applied): tape, from the prepared image, says so.
    expect(lastRequest()).toContain('test-exit=1');
    expect(lastRequest()).toContain('# tests 5');

    for (const r of [first, second]) expect(await leftoversOf(r.id)).toEqual([]);
  });
});
