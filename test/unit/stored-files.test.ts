import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { lastServePort } from '../../core/cli/commands/serve';
import { EnvironmentTrust } from '../../core/environment/environment-trust';
import { PreparedUsage } from '../../core/environment/prepared-environments';
import { ProviderCatalog } from '../../core/keys/provider-catalog';
import { SecretStore } from '../../core/network/gateway/secret-store';
import { ProjectNetworkStore } from '../../core/network/project-network-store';

/**
 * Each file Airlock writes and reads back, fed a damaged copy: a clear INVALID_INPUT naming the
 * file and the field (docs/architecture.md §5), never a crash and never a silent default. The run's
 * own files (result, events, audit and apply logs, checkpoints, session, attempt groups) are
 * covered next to their stores.
 */
let home: string;
beforeEach(async () => {
  home = await mkdtemp(path.join(os.tmpdir(), 'airlock-stored-'));
});
afterEach(async () => {
  await rm(home, { recursive: true, force: true });
});

const damaged = (file: string, what: string) => ({ kind: 'INVALID_INPUT', message: expect.stringContaining(`${file} is damaged: ${what}`) as unknown });

async function put(file: string, text: string): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, text);
}

describe('stored files, damaged', () => {
  it('providers.json: named, and never replaced by an empty catalog on the next save', async () => {
    const file = path.join(home, 'providers.json');
    const text = JSON.stringify({ version: 1, custom: [{ id: 'mine', label: 'Mine', kind: 'openai', baseUrl: 'http://127.0.0.1:1', requiresKey: 'yes', models: [] }] });
    await put(file, text);
    await expect(new ProviderCatalog({ home }).list()).rejects.toMatchObject(damaged(file, 'field custom.0.requiresKey'));
    await expect(new ProviderCatalog({ home }).add({ id: 'other', baseUrl: 'http://127.0.0.1:2' })).rejects.toMatchObject({ kind: 'INVALID_INPUT' });
    expect(await readFile(file, 'utf8')).toBe(text);
    await put(file, '{"version": 1,');
    await expect(new ProviderCatalog({ home }).list()).rejects.toMatchObject(damaged(file, 'not valid JSON'));
  });

  it('serve.json: named (serve then says so and takes a new port)', async () => {
    const file = path.join(home, 'serve.json');
    expect(await lastServePort(home)).toBeUndefined();
    await put(file, JSON.stringify({ port: 70000 }));
    await expect(lastServePort(home)).rejects.toMatchObject(damaged(file, 'field port'));
    await put(file, JSON.stringify({ port: 4321 }));
    expect(await lastServePort(home)).toBe(4321);
  });

  it("a project's network.json: named with its field", async () => {
    const store = new ProjectNetworkStore(path.join(home, 'project'), home);
    await put(store.file, JSON.stringify({ version: 1, allow: 'everything' }));
    await expect(store.load()).rejects.toMatchObject(damaged(store.file, 'field allow'));
  });

  it('egress-secrets.json (metadata only): named, not a JSON crash', async () => {
    const store = new SecretStore({ home, service: 'airlock-test-unused' });
    await put(store.file, '{"version": 1, "secrets": [');
    await expect(store.list()).rejects.toMatchObject(damaged(store.file, 'not valid JSON'));
    await put(store.file, JSON.stringify({ version: 1, secrets: [{ name: 7 }] }));
    await expect(store.list()).rejects.toMatchObject(damaged(store.file, 'field secrets.0'));
  });

  it('environment-trust.json: named, not read as "nothing accepted" (the next accept would drop the rest)', async () => {
    const project = path.join(home, 'project');
    const trust = new EnvironmentTrust(project, home);
    const env = { configPath: '.devcontainer/devcontainer.json', contentHash: 'a'.repeat(64) };
    expect(await trust.state(env)).toBe('new');
    await trust.accept(env);
    const file = path.join(path.dirname(new ProjectNetworkStore(project, home).file), 'environment-trust.json');
    const stored = JSON.parse(await readFile(file, 'utf8')) as { accepted: Record<string, unknown> };
    stored.accepted[env.configPath] = { contentHash: 12 };
    await put(file, JSON.stringify(stored));
    await expect(trust.state(env)).rejects.toMatchObject(damaged(file, 'field accepted.'));
    await expect(trust.accept({ ...env, configPath: 'other.json' })).rejects.toMatchObject({ kind: 'INVALID_INPUT' });
  });

  it('prepared-environments.json: named', async () => {
    const file = path.join(home, 'prepared-environments.json');
    const usage = new PreparedUsage(home);
    expect(await usage.read()).toEqual({});
    await put(file, JSON.stringify({ version: 2, lastUsed: {} }));
    await expect(usage.read()).rejects.toMatchObject(damaged(file, 'field version'));
  });
});
