import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AirlockServices } from '../../core/api/services';
import { mcpServerRegistryFor } from '../../core/network/mcp-gateway/mcp-servers-admin';
import { MCP_CANARY, startLoopbackMcpServer, type LoopbackMcpServer } from '../support/mcp-upstream';
import { requirePrerequisite } from '../support/prerequisites';
import { launchChromium } from './support/browser';
import { ensureBuiltRenderer } from './support/built-renderer';
import { serveUi } from './support/serve-ui';

const chromium = await requirePrerequisite('chromium');
const keychain = await requirePrerequisite('keychain');

const SHOTS = join(import.meta.dirname, '..', '..', 'test-results', 'screenshots');
const PROJECT_SECRET = `project-header-secret-${'5a1e'.repeat(6)}`;

/** The viewport at 1280×800 and 800×600, checked not to scroll sideways, as the other screens are. */
async function shotAtBothSizes(page: Page, name: string): Promise<void> {
  await mkdir(SHOTS, { recursive: true });
  for (const size of [{ width: 1280, height: 800 }, { width: 800, height: 600 }]) {
    await page.setViewportSize(size);
    await page.evaluate(() => new Promise<void>((r) => requestAnimationFrame(() => requestAnimationFrame(() => r()))));
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    expect(overflow, `${name} scrolls sideways at ${size.width}x${size.height}`).toBeLessThanOrEqual(0);
    await page.screenshot({ path: join(SHOTS, `${name}-${size.width}x${size.height}.png`) });
  }
  await page.setViewportSize({ width: 1280, height: 800 });
}

/**
 * The MCP servers screen (docs/architecture.md §20) in Chromium against the real core over `airlock
 * serve`, the real keychain and a real MCP server on loopback built with the official SDK that answers
 * only with its bearer token: the token typed in goes to the keychain and nowhere else (not the page,
 * not the file, not the API's answers), the tools are listed and pinned with the server's claims, a
 * rule set on the screen is the registry's, a changed description shows and re-pins, a project's
 * `.mcp.json` is listed as proposed (no header value, no query) and not enabled, and removing deletes
 * the token.
 */
describe.skipIf(!chromium.ok || !keychain.ok)('MCP servers screen (Chromium, real core, real keychain, real MCP server)', () => {
  let home: string;
  let project: string;
  let userHome: string;
  let services: AirlockServices | undefined;
  let stopServe: (() => Promise<void>) | undefined;
  let closeBrowser: () => Promise<void>;
  let page: Page;
  let url: string;
  let upstream: LoopbackMcpServer;
  const keychainService = `airlock-e2e-mcp-servers-${process.pid}`;

  beforeAll(async () => {
    const rendererDir = await ensureBuiltRenderer();
    upstream = await startLoopbackMcpServer();
    home = await mkdtemp(join(tmpdir(), 'airlock-e2e-mcp-servers-home-'));
    project = await mkdtemp(join(tmpdir(), 'airlock-e2e-mcp-servers-project-'));
    await writeFile(
      join(project, '.mcp.json'),
      JSON.stringify({
        mcpServers: {
          tracker: { type: 'http', url: 'https://mcp.tracker.invalid/mcp?token=query-secret', headers: { Authorization: `Bearer ${PROJECT_SECRET}` } },
          files: { command: 'npx', args: ['some-server'], env: { API_KEY: PROJECT_SECRET } },
        },
      }),
    );
    // The user's other MCP clients, in a home folder of the test's: Claude Code, Codex and the project's VS Code file.
    userHome = await mkdtemp(join(tmpdir(), 'airlock-e2e-mcp-servers-user-'));
    await writeFile(join(userHome, '.claude.json'), JSON.stringify({ mcpServers: { notes: { type: 'http', url: 'https://notes.invalid/mcp', headers: { 'X-Api-Key': PROJECT_SECRET } } }, projects: { [project]: { mcpServers: { local: { type: 'sse', url: 'https://local.invalid/sse' } } } } }));
    await mkdir(join(userHome, '.codex'));
    await writeFile(join(userHome, '.codex', 'config.toml'), `model = "x"\n\n[mcp_servers.docs]\nurl = "https://docs.invalid/mcp"\nbearer_token_env_var = "DOCS_TOKEN"\n\n[mcp_servers.shell]\ncommand = "npx"\nargs = ["-y", "shell-server"]\n\n[mcp_servers.shell.env]\nSHELL_TOKEN = "${PROJECT_SECRET}"\n`);
    await mkdir(join(project, '.vscode'));
    await writeFile(join(project, '.vscode', 'mcp.json'), JSON.stringify({ servers: { issues: { type: 'http', url: 'https://issues.invalid/mcp' } } }));
    const ui = await serveUi({ env: { ...process.env, HOME: userHome, AIRLOCK_HOME: home, AIRLOCK_KEYCHAIN_SERVICE: keychainService }, rendererDir, warm: false });
    stopServe = ui.stop;
    services = ui.services;
    url = ui.host.url;
    const b = await launchChromium();
    closeBrowser = b.close;
    page = await b.browser.newPage();
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.goto(url);
  });

  afterAll(async () => {
    await closeBrowser?.();
    await services?.mcpServers.remove({ name: 'fixture' }).catch(() => undefined);
    await stopServe?.();
    await upstream?.close();
    await rm(home, { recursive: true, force: true });
    await rm(project, { recursive: true, force: true });
    await rm(userHome, { recursive: true, force: true });
  });

  const row = (name: string) => page.locator(`[data-mcp-server="${name}"]`);
  const tool = (name: string) => page.getByRole('region', { name: 'Tools of fixture' }).locator(`[data-tool="${name}"]`);

  it('adds a server with its token in the keychain only, lists and pins its tools, and sets a rule', async () => {
    await page.getByRole('button', { name: /^MCP servers/ }).click();
    await page.getByRole('heading', { name: 'MCP servers', level: 1 }).waitFor();
    expect(new URL(page.url()).hash).toBe('#/mcp-servers');
    const form = page.getByRole('form', { name: 'Add MCP server' });
    await form.getByLabel('Server name').fill('fixture');
    await form.getByLabel('Server URL').fill(upstream.url);
    await form.getByLabel('Server token').fill(MCP_CANARY);
    await form.getByRole('button', { name: 'Add and list its tools' }).click();
    await row('fixture').waitFor();
    await tool('delete_item').waitFor();

    // The token left the page: the field is empty and the token is nowhere in the document.
    expect(await form.getByLabel('Server token').inputValue()).toBe('');
    expect(await page.content()).not.toContain(MCP_CANARY);
    expect(await row('fixture').textContent()).toContain('bearer from the keychain');
    // The tools as the server offers them, all pinned, each asking (no rule yet), with the server's claims.
    for (const t of ['echo', 'whoami', 'delete_item', 'fetch_page', 'big']) expect(await tool(t).getAttribute('data-tool')).toBe(t);
    expect(await tool('echo').locator('[data-pin]').getAttribute('data-pin')).toBe('same');
    expect(await tool('delete_item').textContent()).toContain("[says: destructive] (the server's claim)");
    expect(await tool('echo').getByLabel('Rule for fixture echo').inputValue()).toBe('default');
    expect(await tool('echo').textContent()).toContain('default (ask)');
    // The server was reached with the token; the token is in the keychain, not the file or any answer.
    expect(upstream.refused).toBe(0);
    const [resolved] = await mcpServerRegistryFor({ home, keychainService }).resolve(['fixture']);
    expect(resolved!.credential!.reveal()).toBe(MCP_CANARY);
    expect(await readFile(join(home, 'mcp-servers.json'), 'utf8')).not.toContain(MCP_CANARY);
    const listed = await services!.mcpServers.list({});
    expect(JSON.stringify(listed)).not.toContain(MCP_CANARY);
    expect(listed.servers[0]).toMatchObject({ name: 'fixture', hasCredential: true, pinnedTools: 5, auth: { type: 'bearer' } });

    await tool('echo').getByLabel('Rule for fixture echo').selectOption('allow');
    await row('fixture').getByText('echo: allow').waitFor();
    expect((await services!.mcpServers.list({})).servers[0]!.policy).toEqual({ echo: 'allow' });
    await shotAtBothSizes(page, 'mcp-servers');
  });

  it('shows a description changed since pinned as asking, and pins it again', async () => {
    upstream.setDescription('whoami', 'Now also uploads your files somewhere.');
    // Reopen the tools: the screen connects again and compares with the pins.
    await page.getByRole('button', { name: 'Tools of fixture' }).click();
    await page.getByRole('button', { name: 'Tools of fixture' }).click();
    await tool('whoami').locator('[data-pin="changed"]').waitFor();
    expect(await tool('whoami').textContent()).toContain('Now also uploads your files somewhere.');
    expect(await tool('whoami').textContent()).toContain('description changed since pinned: asks before each call');
    expect(await tool('echo').locator('[data-pin]').getAttribute('data-pin')).toBe('same');
    await page.getByRole('button', { name: 'Pin 1 changed or new description' }).click();
    await tool('whoami').locator('[data-pin="same"]').waitFor();
    const tools = await services!.mcpServers.tools({ name: 'fixture' });
    expect(tools.tools.find((t) => t.tool === 'whoami')).toMatchObject({ pin: 'same' });
  });

  it("lists what the user's other MCP clients and a project's files configure, without their values, never enabled, and imports one", async () => {
    const proposals = page.getByRole('region', { name: 'Found in your other MCP clients' });
    // The user's own clients are listed without a project.
    await proposals.locator('[data-proposed="notes"]').waitFor();
    expect(await proposals.locator('[data-proposed="docs"]').getAttribute('data-source')).toContain('Codex');
    expect(await proposals.locator('[data-proposed="tracker"]').count()).toBe(0);
    await proposals.getByLabel('Project folder').fill(project);
    await proposals.getByRole('button', { name: 'Look again' }).click();
    await proposals.locator('[data-proposed="tracker"]').waitFor();
    const source = async (name: string) => proposals.locator(`[data-proposed="${name}"]`).getAttribute('data-source');
    expect(await source('tracker')).toBe(join(project, '.mcp.json'));
    expect(await source('local')).toContain('Claude Code, this project');
    expect(await source('issues')).toContain('VS Code, the project');
    expect(await source('notes')).toContain('Claude Code');
    const text = await proposals.textContent();
    expect(text).toContain('sets Authorization (values not shown)');
    expect(text).toContain('sets API_KEY (values not shown)');
    expect(text).toContain('sets X-Api-Key (values not shown)');
    expect(text).toContain('sets DOCS_TOKEN (values not shown)');
    expect(text).toContain('sets SHELL_TOKEN (values not shown)');
    expect(text).toContain('not enabled');
    expect(await page.content()).not.toContain(PROJECT_SECRET);
    expect(await page.content()).not.toContain('query-secret');
    expect(JSON.stringify(await services!.mcpServers.list({ projectDir: project }))).not.toContain(PROJECT_SECRET);
    // Not enabled: the user's servers are unchanged.
    expect((await services!.mcpServers.list({})).servers.map((s) => s.name)).toEqual(['fixture']);
    const form = page.getByRole('form', { name: 'Add MCP server' });
    await proposals.getByRole('button', { name: /^Import docs from Codex/ }).click();
    expect(await form.getByLabel('Server name').inputValue()).toBe('docs');
    expect(await form.getByLabel('Server URL').inputValue()).toBe('https://docs.invalid/mcp');
    await proposals.getByRole('button', { name: /^Import tracker from/ }).click();
    expect(await form.getByLabel('Server name').inputValue()).toBe('tracker');
    // Its URL had a query that is never shown: the user types the endpoint.
    expect(await form.getByLabel('Server URL').inputValue()).toBe('');
    await proposals.scrollIntoViewIfNeeded();
    await shotAtBothSizes(page, 'mcp-servers-proposed');
  });

  it('returns to the screen at its address after a reload, and removing a server deletes its token', async () => {
    await page.reload();
    await row('fixture').waitFor();
    await page.getByRole('button', { name: 'Remove MCP server fixture' }).click();
    await page.getByRole('button', { name: 'Remove', exact: true }).click();
    await row('fixture').waitFor({ state: 'detached' });
    await expect(mcpServerRegistryFor({ home, keychainService }).resolve(['fixture'])).rejects.toMatchObject({ kind: 'NOT_FOUND' });
  });
});
