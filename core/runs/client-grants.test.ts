import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_SETTINGS } from '../settings/settings-store';
import type { Settings } from '../../contracts/settings';
import { ClientGrants, forbiddenFolder, newClientRef, SlotCap } from './client-grants';

describe('what an MCP client may use (docs/architecture.md §17)', () => {
  let root = '';
  let home = '';
  let userHome = '';
  let project = '';
  let settings: Settings;
  let grants: ClientGrants;

  beforeAll(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'airlock-grants-'));
    home = path.join(root, 'airlock-home');
    userHome = path.join(root, 'me');
    project = path.join(userHome, 'src', 'app');
    await mkdir(home, { recursive: true });
    await mkdir(project, { recursive: true });
    settings = { ...DEFAULT_SETTINGS };
    grants = new ClientGrants({ home, userHome, settings: { get: async () => settings } });
  });
  afterAll(async () => {
    await grants.dispose();
    await rm(root, { recursive: true, force: true });
  });

  it('never the home folder, its ancestors, /, system folders, Airlock\'s data or a folder holding keys', async () => {
    const opts = { home, userHome };
    expect(await forbiddenFolder(userHome, opts)).toBe('your home folder');
    expect(await forbiddenFolder(root, opts)).toBe('a folder that holds your home folder');
    expect(await forbiddenFolder('/', opts)).toBe('the root of the file system');
    expect(await forbiddenFolder('/proc/1', opts)).toBe('a system folder (/proc)');
    expect(await forbiddenFolder('/etc', opts)).toBe('a system folder (/etc)');
    expect(await forbiddenFolder(home, opts)).toBe("Airlock's own data");
    expect(await forbiddenFolder(project, opts)).toBeUndefined();
    const keyed = path.join(userHome, 'keyed');
    await mkdir(path.join(keyed, '.gnupg'), { recursive: true });
    expect(await forbiddenFolder(keyed, opts)).toBe('a folder holding .gnupg');
    const chain = path.join(userHome, 'chain');
    await mkdir(chain);
    await writeFile(path.join(chain, 'login.keychain-db'), '');
    expect(await forbiddenFolder(chain, opts)).toMatch(/keychain/);
  });

  it('an ungranted folder is refused when no app is open to ask; granted in Settings or with --project it is allowed, subfolders included', async () => {
    const client = newClientRef(() => 'Test Client 1');
    await expect(grants.folder(client, project, { purpose: 'sandbox' })).rejects.toThrow(/not a folder the user granted MCP clients, and no Airlock app is open/);
    settings = { ...settings, mcpProjects: [{ dir: path.join(userHome, 'src') }] };
    expect(await grants.folder(client, project, { purpose: 'sandbox' })).toMatchObject({ via: 'settings' });
    settings = { ...settings, mcpProjects: [] };
    const flagged = newClientRef(() => 'Test Client 2', () => [project]);
    expect(await grants.folder(flagged, project, { purpose: 'run' })).toMatchObject({ via: 'flag' });
    await expect(grants.folder(flagged, 'relative/dir', { purpose: 'run' })).rejects.toThrow(/absolute path/);
  });

  it('network within the grant; open only with the setting', async () => {
    const client = newClientRef(() => 'c');
    const folder = { dir: project, via: 'settings' as const, grant: { dir: project, allow: ['registry.npmjs.org'] } };
    await grants.network(client, folder, 'none');
    await grants.network(client, folder, 'allowlist', ['registry.npmjs.org']);
    await expect(grants.network(client, folder, 'allowlist', ['evil.invalid'])).rejects.toThrow(/evil\.invalid is not in the allowlist/);
    await expect(grants.network(client, folder, 'open')).rejects.toThrow(/"open" is not allowed/);
    await grants.network(client, { ...folder, grant: { dir: project, openNetwork: true } }, 'open');
  });

  it('a run that reaches internal hosts is never continued by an MCP client, even its own', async () => {
    const client = newClientRef(() => 'c-internal');
    client.runs.add('run-lan');
    const parent = { id: 'run-lan', projectDir: project, network: 'allowlist' as const, allowlist: ['git.corp.test'], internalHosts: ['git.corp.test'] };
    settings = { ...settings, mcpProjects: [{ dir: project, allow: ['git.corp.test'], continueRuns: true }] };
    await expect(grants.continuation(client, parent)).rejects.toThrow(/reaches internal hosts \(git\.corp\.test\); MCP clients cannot continue it/);
    await grants.continuation(client, { ...parent, internalHosts: [] });
    settings = { ...settings, mcpProjects: [] };
  });

  it('a cap taken synchronously holds under concurrency', async () => {
    const cap = new SlotCap(4);
    const taken = await Promise.all(Array.from({ length: 8 }, async () => cap.take()));
    expect(taken.filter(Boolean)).toHaveLength(4);
    taken[0]?.();
    taken[0]?.();
    expect(cap.count).toBe(3);
  });
});
