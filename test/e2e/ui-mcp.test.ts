import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AirlockServices } from '../../core/api/services';
import { requirePrerequisite } from '../support/prerequisites';
import { launchChromium } from './support/browser';
import { polishShot } from './support/polish-shot';
import { ensureBuiltRenderer } from './support/built-renderer';
import { gitProject } from './support/git-project';
import { serveUi, type ServedUi } from './support/serve-ui';

const docker = await requirePrerequisite('docker');
const chromium = await requirePrerequisite('chromium');

/**
 * The MCP door through the served UI in Chromium (docs/architecture.md §17): Settings opens the HTTP
 * door and shows the setup lines; an MCP client (the official SDK over that door) makes a change in a
 * sandbox and asks to apply it; the browser shows who asks and the exact patch; the user's click
 * applies exactly the reviewed bytes.
 */
describe.skipIf(!docker.ok || !chromium.ok)('MCP apply approval in the browser UI (Chromium, real core, Docker, SDK client)', () => {
  let home: string;
  let project: string;
  let ui: ServedUi;
  let services: AirlockServices;
  let closeBrowser: () => Promise<void>;
  let page: Page;
  const pageErrors: string[] = [];

  beforeAll(async () => {
    const rendererDir = await ensureBuiltRenderer();
    home = await mkdtemp(join(tmpdir(), 'airlock-e2e-mcp-home-'));
    project = await gitProject('airlock-e2e-mcp-', { 'hello.txt': 'hello\n' }, { name: 'Mcp Person', email: 'mcp@example.invalid' });
    ui = await serveUi({ env: { ...process.env, AIRLOCK_HOME: home }, rendererDir, warm: false });
    services = ui.services;
    const b = await launchChromium();
    closeBrowser = b.close;
    page = await b.browser.newPage();
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    await page.goto(ui.host.url);
  }, 300_000);

  afterAll(async () => {
    await closeBrowser?.();
    await ui?.stop();
    await rm(home, { recursive: true, force: true });
    await rm(project, { recursive: true, force: true });
  });

  it('Settings opens the door; the user approves a client\'s apply after seeing the exact patch', async () => {
    await page.getByRole('button', { name: /Settings/ }).click();
    const panel = page.getByRole('region', { name: /MCP/ });
    // `airlock` is not on the test's PATH: the line starts this checkout's CLI by its full path, and the
    // app's own test starts exactly that command as a stdio client and lists its tools.
    await expect.poll(() => panel.locator('[data-client="claude-code"] pre').textContent()).toBe(`claude mcp add airlock -- ${process.execPath} ${join(import.meta.dirname, '..', '..', 'bin', 'airlock.js')} mcp`);
    expect(await panel.getByRole('note', { name: 'Command used' }).textContent()).toContain('npm link');
    expect(await panel.getByRole('group', { name: 'MCP clients' }).textContent()).toContain('No MCP client has made a sandbox yet.');
    await panel.getByRole('button', { name: 'Test the stdio setup' }).click();
    await expect.poll(() => panel.getByRole('status', { name: 'Setup test' }).textContent().catch(() => ''), { timeout: 90_000 }).toMatch(/^Works: airlock mcp answered with \d+ tools/);
    expect((await services.settings.get({})).mcpHttp).toBeFalsy();
    // The switch is a setting like the others: nothing opens until Save (it used to apply at once).
    const settingsForm = page.getByRole('form', { name: 'Settings' });
    await settingsForm.getByLabel(/Serve MCP over HTTP/).check();
    expect((await services.settings.get({})).mcpHttp).toBeFalsy();
    expect((await services.mcp.info({})).http.url).toBeUndefined();
    await settingsForm.getByRole('button', { name: 'Save settings' }).click();
    await expect.poll(async () => (await services.settings.get({})).mcpHttp, { timeout: 20_000 }).toBe(true);
    await expect.poll(() => panel.locator('[data-mcp-url]').textContent(), { timeout: 20_000 }).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
    const info = await services.mcp.info({});
    expect(await panel.locator('[data-client="claude-code-http"] pre').textContent()).toContain(`Bearer ${info.http.token}`);

    const client = new Client({ name: 'e2e-mcp-client', version: '3.1' });
    await client.connect(new StreamableHTTPClientTransport(new URL(info.http.url as string), { requestInit: { headers: { authorization: `Bearer ${info.http.token}` } } }));
    const call = async (name: string, args: Record<string, unknown>) => (await client.callTool({ name, arguments: args }, undefined, { timeout: 300_000 })) as CallToolResult;
    const value = async <T,>(name: string, args: Record<string, unknown>) => {
      const r = await call(name, args);
      if (r.isError) throw new Error(JSON.stringify(r.content));
      return r.structuredContent as T;
    };
    // A client reaches only folders the user granted (docs/architecture.md §17); asking in the app is ui-less here.
    await services.settings.update({ mcpProjects: [{ dir: project }] });
    const { sandboxId } = await value<{ sandboxId: string }>('sandbox_create', { projectDir: project });
    await value('sandbox_write_file', { sandboxId, path: 'hello.txt', content: 'hello from the mcp client\n' });
    const { patchSha256 } = await value<{ patchSha256: string }>('sandbox_destroy', { sandboxId });

    const applying = call('run_apply', { runId: sandboxId, reviewedSha256: patchSha256, waitSec: 120 });
    const dialog = page.getByRole('dialog', { name: /Apply request from e2e-mcp-client 3\.1/ });
    await dialog.waitFor({ timeout: 30_000 });
    expect(await dialog.locator('[data-client-name]').textContent()).toBe('e2e-mcp-client 3.1');
    await expect.poll(() => dialog.locator('[data-patch]').textContent(), { timeout: 20_000 }).toContain('+hello from the mcp client');
    expect(await readFile(join(project, 'hello.txt'), 'utf8')).toBe('hello\n');
    await dialog.getByRole('button', { name: 'Approve and apply' }).click();
    const result = await applying;
    expect(result.isError, JSON.stringify(result.content)).toBeFalsy();
    expect(result.structuredContent).toMatchObject({ applied: ['hello.txt'], approvedBy: 'user' });
    expect(await readFile(join(project, 'hello.txt'), 'utf8')).toBe('hello from the mcp client\n');
    await dialog.waitFor({ state: 'detached', timeout: 20_000 });
    // The client is listed from the run history, under the name it gave (shown as its claim).
    await page.getByRole('button', { name: /Settings/ }).click();
    await expect.poll(() => panel.locator('[data-mcp-client="e2e-mcp-client 3.1"]').textContent().catch(() => ''), { timeout: 20_000 }).toMatch(/e2e-mcp-client 3\.1 \(as it names itself\) · 1 sandbox · last /);
    // An MCP session in History offers no Run again (it has no task or agent to run again; polish list).
    await page.getByRole('button', { name: /^History/ }).click();
    const row = page.locator(`tr[data-run="${sandboxId}"]`);
    await row.waitFor({ timeout: 20_000 });
    expect(await row.getByRole('button', { name: 'Delete' }).count()).toBe(1);
    expect(await row.getByRole('button', { name: 'Run again' }).count()).toBe(0);
    await polishShot(page, 'history-mcp-session');
    await client.close();
    expect(pageErrors).toEqual([]);
  }, 300_000);
});
