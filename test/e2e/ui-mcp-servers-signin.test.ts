import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AirlockServices } from '../../core/api/services';
import { OsKeychainBackend } from '../../core/keys/keychain-backend';
import { projectDataDir } from '../../core/network/project-network-store';
import { startOAuthMcpServer, type OAuthMcpServer } from '../support/oauth-mcp-server';
import { requirePrerequisite } from '../support/prerequisites';
import { launchChromium } from './support/browser';
import { ensureBuiltRenderer } from './support/built-renderer';
import { serveUi } from './support/serve-ui';

const chromium = await requirePrerequisite('chromium');
const keychain = await requirePrerequisite('keychain');

/**
 * The MCP servers screen's sign-in and per-project servers (docs/architecture.md §20), in Chromium
 * against the real core over `airlock serve` and the real keychain: a server with its own OAuth
 * authorization server on loopback (the official SDK) is added with "Sign in"; the host opens its
 * sign-in page (here a stand-in browser that approves at once and follows the redirect back) and the
 * tokens land in the keychain only. The server enabled for a project is stored under the home's
 * project folder and ticked in the New run form for that project.
 */
describe.skipIf(!chromium.ok || !keychain.ok)('MCP servers screen: OAuth sign-in and servers per project (Chromium, real core, real keychain)', () => {
  let home: string;
  let project: string;
  let services: AirlockServices | undefined;
  let stopServe: (() => Promise<void>) | undefined;
  let closeBrowser: () => Promise<void>;
  let page: Page;
  let oauth: OAuthMcpServer;
  const opened: string[] = [];
  const pageErrors: string[] = [];
  const keychainService = `airlock-e2e-mcp-signin-${process.pid}`;

  beforeAll(async () => {
    const rendererDir = await ensureBuiltRenderer();
    oauth = await startOAuthMcpServer();
    home = await mkdtemp(join(tmpdir(), 'airlock-e2e-mcp-signin-home-'));
    project = await mkdtemp(join(tmpdir(), 'airlock-e2e-mcp-signin-project-'));
    const ui = await serveUi({
      env: { ...process.env, AIRLOCK_HOME: home, AIRLOCK_KEYCHAIN_SERVICE: keychainService },
      rendererDir,
      warm: false,
      // The user's browser on the sign-in page: it approves at once and follows the redirect to Airlock's callback.
      openExternal: async (url) => {
        opened.push(url);
        const res = await fetch(url, { redirect: 'manual' });
        await fetch(res.headers.get('location') ?? 'http://127.0.0.1:9/none');
      },
    });
    stopServe = ui.stop;
    services = ui.services;
    const b = await launchChromium();
    closeBrowser = b.close;
    page = await b.browser.newPage();
    await page.setViewportSize({ width: 1280, height: 800 });
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    await page.goto(ui.host.url);
  });

  afterAll(async () => {
    await closeBrowser?.();
    await services?.mcpServers.remove({ name: 'docs' }).catch(() => undefined);
    await stopServe?.();
    await oauth?.close();
    await rm(home, { recursive: true, force: true });
    await rm(project, { recursive: true, force: true });
  });

  const row = (name: string) => page.locator(`[data-mcp-server="${name}"]`);

  it('adds an OAuth server and signs in on the host: the tokens are in the keychain only', async () => {
    await page.getByRole('button', { name: /^MCP servers/ }).click();
    const form = page.getByRole('form', { name: 'Add MCP server' });
    await form.getByLabel('Server name').fill('docs');
    await form.getByLabel('Server URL').fill(oauth.url);
    await form.getByLabel('Sign in (OAuth, in your browser)').check();
    expect(await form.getByLabel('Server token').count()).toBe(0);
    await form.getByRole('button', { name: 'Add and sign in' }).click();
    await row('docs').getByText('OAuth, signed in on the host').waitFor();
    await row('docs').getByRole('button', { name: 'Sign in to docs' }).getByText('Sign in again').waitFor();
    // The host opened the server's own authorization page, once; the token it issued is in the keychain, nowhere else.
    expect(opened).toHaveLength(1);
    expect(new URL(opened[0]!).origin).toBe(new URL(oauth.url).origin);
    expect(oauth.issued).toHaveLength(1);
    const stored = await new OsKeychainBackend(keychainService).get('mcp-server:docs');
    expect(stored).toContain(oauth.issued[0]);
    expect(await page.content()).not.toContain(oauth.issued[0]);
    expect(await readFile(join(home, 'mcp-servers.json'), 'utf8')).not.toContain(oauth.issued[0]);
    expect(JSON.stringify(await services!.mcpServers.list({}))).not.toContain(oauth.issued[0]);
    // Signed in, its tools were listed and pinned with the token.
    expect((await services!.mcpServers.list({})).servers[0]).toMatchObject({ name: 'docs', hasCredential: true, auth: { type: 'oauth' } });

    // Signing in again replaces the tokens through the same page.
    await row('docs').getByRole('button', { name: 'Sign in to docs' }).click();
    await page.getByText('Signed in to docs').first().waitFor();
    await expect.poll(() => oauth.issued.length).toBe(2);
    expect(opened).toHaveLength(2);
  });

  it('enables the server for a project: stored under the home, ticked in the New run form for that project only', async () => {
    const section = page.getByRole('region', { name: 'Enabled per project' });
    await section.getByLabel('Project folder for MCP servers').fill(project);
    await section.getByRole('button', { name: 'Show' }).click();
    await section.getByLabel('Enable docs for the project').check();
    await section.getByRole('button', { name: 'Save for this project' }).click();
    await expect.poll(async () => (await services!.mcpServers.projectServers({ projectDir: project })).servers).toEqual(['docs']);
    const file = JSON.parse(await readFile(join(projectDataDir(project, home), 'mcp-servers.json'), 'utf8')) as { servers: string[] };
    expect(file.servers).toEqual(['docs']);

    await page.getByRole('button', { name: /^New run/ }).click();
    await page.getByLabel('Project folder').fill(project);
    const box = page.getByLabel('MCP server docs');
    await expect.poll(() => box.isChecked()).toBe(true);
    // The airlock run line for the form names it.
    await expect.poll(() => page.getByLabel('CLI command').first().textContent()).toContain('--mcp docs');
    // Another folder has none enabled.
    await page.getByLabel('Project folder').fill(home);
    await expect.poll(() => box.isChecked()).toBe(false);
    expect(pageErrors).toEqual([]);
  });
});
