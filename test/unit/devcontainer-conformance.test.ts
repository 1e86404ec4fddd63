import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { compareReading, type PlanDevcontainer } from '../../scripts/conformance/compare-devcontainer';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const corpus = path.join(repo, 'test/fixtures/devcontainer-corpus');

function conformance(...args: string[]): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [path.join(repo, 'node_modules/tsx/dist/cli.mjs'), path.join(repo, 'scripts/devcontainer-conformance.ts'), ...args], { cwd: repo, timeout: 300_000 }, (err, out, errOut) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, out, err: errOut });
    });
  });
}

/** docs/architecture.md §16, "Conformance": the script that holds Airlock's reading against the reference's. */
describe('npm run conformance:devcontainer', () => {
  it('reads a small corpus with the reference CLI and airlock env plan: per configuration a verdict, then the counts', async () => {
    const r = await conformance(corpus);
    expect(r.err).toBe('');
    expect(r.out).toMatch(/^read identically\s+dockerfile-parent\/\.devcontainer\/devcontainer\.json$/m);
    expect(r.out).toMatch(/^refused for a named hardening reason\s+image-features\/\.devcontainer\/devcontainer\.json$/m);
    expect(r.out).toMatch(/refused: runArgs: extra engine options are not applied/);
    expect(r.out).toMatch(/refused: remoteUser: setup and the agent run as uid 1000/);
    expect(r.out).toMatch(/^refused for a named hardening reason\s+compose-app\/\.devcontainer\/devcontainer\.json$/m);
    expect(r.out).toMatch(/note: feature localhost:1\/airlock-test\/node:1 not fetched/);
    expect(r.out).toMatch(/^3 configurations: 1 read identically, 2 refused for a named hardening reason, 0 defects \(100\.0%, goal 95%\); 1 ask for published features/m);
    expect(r.code).toBe(0);
  }, 300_000);

  it('is skipped with a note when no corpus is given', async () => {
    const r = await conformance();
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/skipped: no corpus given/);
  }, 60_000);
});

describe('compareReading', () => {
  const root = '/src/app';
  const reference = {
    configuration: { image: 'debian', remoteEnv: { PATH: '${containerEnv:PATH}:/workspaces/app/bin' }, postCreateCommand: 'make', runArgs: ['--privileged'] },
    workspace: { workspaceFolder: '/workspaces/app', workspaceMount: 'type=bind,source=/src/app,target=/workspaces/app' },
  };
  const plan: PlanDevcontainer = {
    build: { kind: 'image', image: 'debian' },
    features: [],
    setup: [{ hook: 'postCreateCommand', argv: ['/bin/sh', '-c', 'make'], cwd: '/workspace' }],
    containerEnv: {},
    remoteEnv: { PATH: '${containerEnv:PATH}:/workspace/bin' },
    env: {},
    ports: [],
    notApplied: [{ field: 'runArgs', reason: 'not applied (hardened)' }],
  };

  it("maps the reference's project folder onto /workspace and counts a named refusal as refused", () => {
    expect(compareReading({ root, config: '.devcontainer.json', reference, plan })).toEqual({ kind: 'refused', refused: ['runArgs: not applied (hardened)'], defects: [], notes: [] });
  });

  it('finds a defect: a variable resolved differently, a command in another folder, an option neither applied nor named', () => {
    const wrong = { ...plan, remoteEnv: { PATH: ':/workspace/bin' }, setup: [{ ...plan.setup[0]!, cwd: '/' }], notApplied: [] };
    const v = compareReading({ root, config: '.devcontainer.json', reference, plan: wrong });
    expect(v.kind).toBe('defect');
    expect(v.defects).toEqual([expect.stringMatching(/^remoteEnv: reference/), expect.stringMatching(/^workspaceFolder: reference "\/workspace", Airlock "\/"/), expect.stringMatching(/^runArgs .* is neither applied nor named/)]);
  });
});
