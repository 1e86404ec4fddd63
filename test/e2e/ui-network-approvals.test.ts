/**
 * Approvals while an intercepted request waits, in Chromium against real runs (real core, Docker
 * sandbox, egress proxy and gateway; the agent is the built-in one driven by the fake upstream):
 * Allow once, Deny (the agent sees the 403), Allow for this project (a second run passes without a
 * question), and a rule the agent proposes, approved. The target is an HTTPS server on 127.0.0.1
 * under a made-up `.test` name only the injected test resolver knows; its CA is passed explicitly.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { AirlockServices } from '../../core/api/services';
import { ALLOW_LOOPBACK_TARGETS_FOR_TESTS } from '../../core/network/egress-proxy';
import { randomBytes } from 'node:crypto';
import { SecretStore } from '../../core/network/gateway/secret-store';
import { ProjectNetworkStore } from '../../core/network/project-network-store';
import { startFakeUpstream, type FakeUpstream } from '../fixtures/fake-upstream';
import { startHttpsTarget, type HttpsTarget } from '../support/https-target';
import { requirePrerequisite } from '../support/prerequisites';
import { launchChromium } from './support/browser';
import { ensureBuiltRenderer } from './support/built-renderer';
import { gitProject } from './support/git-project';
import { serveUi } from './support/serve-ui';

const docker = await requirePrerequisite('docker');
const chromium = await requirePrerequisite('chromium');
const keychain = await requirePrerequisite('keychain');

const KEY = `sk-ant-e2e-${'a11c'.repeat(6)}-NETQ`;
const HOST = 'api.airlock.test';
const SHOTS = join(import.meta.dirname, '..', '..', 'test-results', 'screenshots');

describe.skipIf(!docker.ok || !chromium.ok)('network approvals in the run view (Chromium, Docker, gateway, fake upstream)', () => {
  let home: string;
  let project: string;
  let upstream: FakeUpstream;
  let target: HttpsTarget;
  let port = 0;
  let services: AirlockServices;
  let stopServe: (() => Promise<void>) | undefined;
  let closeBrowser: () => Promise<void>;
  let page: Page;
  let url = '';
  let served: string[] = [];
  const keychainService = `airlock-e2e-netq-${process.pid}`;

  const startRun = async (task: string) =>
    (
      await services.runs.start({
        projectDir: project,
        task,
        agent: 'builtin',
        provider: 'anthropic',
        model: 'claude-sonnet-4-5',
        approval: 'auto',
        isolation: 'container',
        network: 'allowlist',
        allowlist: [`${HOST}:${port}`],
        egressRules: [`${HOST} allow GET /public/**`],
        limits: { timeoutSec: 600 },
      })
    ).id;
  const openRun = async (runId: string) => {
    await page.goto(url);
    await page.getByRole('button', { name: /History/ }).click();
    await page.locator(`tr[data-run="${runId}"]`).click();
  };
  const doneOf = (runId: string) => vi.waitFor(async () => expect((await services.runs.get({ runId })).status).toBe('done'), { timeout: 240_000, interval: 500 });
  /** Everything the agent was told back (the tool results sent to the model). */
  const toolResults = () => JSON.stringify(upstream.requests.map((r) => r.body));
  const curl = (path: string, extra = '') => `curl -sS ${extra} https://${HOST}:${port}${path}; echo " [curl $?]"`;

  beforeAll(async () => {
    const rendererDir = await ensureBuiltRenderer();
    home = await mkdtemp(join(tmpdir(), 'airlock-e2e-home-'));
    project = await gitProject('airlock-e2e-netq-', { 'README.md': '# net\n' }, { name: 'Net Person', email: 'net@example.invalid' });
    target = await startHttpsTarget(HOST, 'netq-target');
    ({ port, served } = target);

    upstream = await startFakeUpstream({ expectedKey: KEY });
    const env = { ...process.env, AIRLOCK_HOME: home, AIRLOCK_KEYCHAIN_SERVICE: keychainService };
    const ui = await serveUi({
      env,
      rendererDir,
      warm: false,
      egressProxyForTests: {
        resolve: async (h) => {
          if (h !== HOST) throw new Error(`ENOTFOUND ${h}`);
          return ['127.0.0.1'];
        },
        [ALLOW_LOOPBACK_TARGETS_FOR_TESTS]: true,
        upstreamCa: [target.caPem],
      },
    });
    stopServe = ui.stop;
    services = ui.services;
    url = ui.host.url;
    await services.keys.set({ provider: 'anthropic', key: KEY, baseUrl: upstream.url, storage: keychain.ok ? 'keychain' : 'session' });
    const b = await launchChromium();
    closeBrowser = b.close;
    page = await b.browser.newPage();
  }, 120_000);

  afterAll(async () => {
    await closeBrowser?.();
    if (services && keychain.ok) await services.keys.remove({ provider: 'anthropic' }).catch(() => undefined);
    await stopServe?.();
    await upstream?.close();
    await target?.close();
    await rm(home, { recursive: true, force: true });
    await rm(project, { recursive: true, force: true });
  });

  it('Allow once, Deny, Allow for this project and an agent-proposed rule, answered in the run view; a second run is not asked', async () => {
    upstream.setScript([
      { toolCalls: [{ name: 'run_command', input: { command: curl('/private/a') } }], usage: { input: 100, output: 20 } },
      { toolCalls: [{ name: 'run_command', input: { command: curl('/private/a') } }], usage: { input: 110, output: 20 } },
      { toolCalls: [{ name: 'run_command', input: { command: curl('/private/b') } }], usage: { input: 120, output: 20 } },
      {
        toolCalls: [{ name: 'run_command', input: { command: `curl -sS http://airlock.invalid/request-access --data-urlencode 'rule=${HOST} allow post /items/*' --data-urlencode 'reason=create the item'; echo " [curl $?]"` } }],
        usage: { input: 130, output: 20 },
      },
      { toolCalls: [{ name: 'run_command', input: { command: curl('/items/1', '-X POST -d x') } }], usage: { input: 140, output: 20 } },
      { toolCalls: [{ name: 'finish', input: { summary: 'Done with the network.' } }], usage: { input: 150, output: 10 } },
    ]);
    const runId = await startRun('Use the API');
    await openRun(runId);

    const request = page.getByRole('alertdialog', { name: 'Allow network request' });
    const answer = async (button: string, expectText: string) => {
      await request.waitFor({ timeout: 240_000 });
      expect(await request.textContent()).toContain(expectText);
      // The question has the focus, neither answer: a stray Enter allows nothing.
      expect(await request.evaluate((el) => el === document.activeElement)).toBe(true);
      await page.keyboard.press('Enter');
      expect(await request.count()).toBe(1);
      await request.getByRole('button', { name: button }).click();
      await request.waitFor({ state: 'detached', timeout: 60_000 });
    };
    await answer('Allow once', `GET https://${HOST}:${port}/private/a`);
    await answer('Deny', '/private/a');
    await request.waitFor({ timeout: 240_000 });
    expect(await request.getByLabel('Rule to add').textContent()).toBe(`${HOST} allow GET /private/b`);
    await page.screenshot({ path: join(SHOTS, 'network-approval-request.png') });
    await answer('Allow for this project', '/private/b');

    const proposal = page.getByRole('alertdialog', { name: 'Approve network rule' });
    await proposal.waitFor({ timeout: 240_000 });
    // The host's own text of the rule, and the agent's reason shown as the agent's.
    expect(await proposal.getByLabel('Proposed rule').textContent()).toBe(`${HOST} allow POST /items/*`);
    expect(await proposal.getByLabel("Agent's reason").textContent()).toBe('create the item');
    await page.screenshot({ path: join(SHOTS, 'network-approval-proposal.png') });
    await proposal.getByRole('button', { name: 'Approve for this run' }).click();
    await doneOf(runId);

    const told = toolResults();
    expect(told).toContain('served GET /private/a');
    expect(told).toContain('the user denied it');
    expect(told).toContain('served GET /private/b');
    expect(told).toContain(`approved: \\"${HOST} allow POST /items/*\\" is in force for this run`);
    expect(told).toContain('served POST /items/1');
    expect(served).toEqual(['GET /private/a', 'GET /private/b', 'POST /items/1']);
    // "For this project" lives in the user's data for the project, not in the project.
    expect(await new ProjectNetworkStore(project, home).loadRules()).toEqual([`${HOST} allow GET /private/b`]);
    const audit = JSON.stringify((await services.audit.read({ runId, offset: 0, limit: 1000 })).records);
    for (const a of ['"answer":"once"', '"answer":"deny"', '"answer":"project"', '"answer":"run"', '"kind":"proposal"', '"reason":"create the item"']) expect(audit).toContain(a);

    // The second run of the project is let through by the remembered rule, with no question.
    upstream.setScript([
      { toolCalls: [{ name: 'run_command', input: { command: curl('/private/b') } }], usage: { input: 100, output: 20 } },
      { toolCalls: [{ name: 'finish', input: { summary: 'Fetched b.' } }], usage: { input: 110, output: 10 } },
    ]);
    const second = await startRun('Fetch b again');
    await openRun(second);
    await doneOf(second);
    const events = await services.runs.events({ runId: second, afterSeq: -1, limit: 5000 });
    expect(JSON.stringify(events)).not.toContain('network_approval');
    expect(served.at(-1)).toBe('GET /private/b');
    expect(await request.count()).toBe(0);
  }, 600_000);

  it.skipIf(!keychain.ok)('the Secrets screen adds GitHub and npm-registry secrets by preset, lists them without a value, and removes one after a confirmation', async () => {
    const store = new SecretStore({ home, service: keychainService });
    const value = `ghp_${randomBytes(18).toString('hex')}`;
    await page.goto(url);
    await page.getByRole('button', { name: 'Secrets' }).click();
    const form = page.getByRole('form', { name: 'Add secret' });
    await form.getByLabel('Secret name').fill('gh');
    await form.getByLabel('Secret value').fill(value);
    await form.getByRole('button', { name: 'Store in keychain' }).click();
    const gh = page.locator('tr[data-secret="gh"]');
    await gh.waitFor({ timeout: 20_000 });
    expect(await gh.textContent()).toContain('github.com, api.github.com, *.githubusercontent.com');
    expect(await gh.textContent()).toContain('bearer, basic:x-access-token');
    expect(await form.getByLabel('Secret value').inputValue()).toBe('');

    await form.getByLabel('npm-style registry').check();
    await form.getByLabel('Secret name').fill('registry');
    await form.getByLabel('Secret hosts').fill('npm.airlock.test');
    await form.getByLabel('Secret value').fill(`npm_${randomBytes(12).toString('hex')}`);
    await form.getByRole('button', { name: 'Store in keychain' }).click();
    const npm = page.locator('tr[data-secret="registry"]');
    await npm.waitFor({ timeout: 20_000 });
    expect(await npm.textContent()).toContain('npm.airlock.test');
    expect(await npm.textContent()).toContain('NPM_TOKEN');
    // A bad name is said, and nothing is stored.
    await form.getByLabel('Other').check();
    await form.getByLabel('Secret name').fill('Bad Name');
    await form.getByLabel('Secret hosts').fill('api.airlock.test');
    await form.getByLabel('Secret value').fill('abcdef');
    await form.getByRole('button', { name: 'Store in keychain' }).click();
    await expect.poll(() => form.getByRole('alert').textContent(), { timeout: 20_000 }).toContain('lower-case');
    expect(await form.getByLabel('Secret value').inputValue()).toBe('abcdef');
    await page.screenshot({ path: join(SHOTS, 'secrets-screen.png') });

    // The value is in the keychain and nowhere on the page.
    expect((await store.resolve(['gh']))[0]?.value.reveal()).toBe(value);
    expect(await page.content()).not.toContain(value);
    expect((await store.list()).map((s) => s.name).sort()).toEqual(['gh', 'registry']);

    await gh.getByRole('button', { name: 'Remove secret gh' }).click();
    const confirm = gh.getByRole('group', { name: 'Confirm remove secret gh' });
    expect(await store.list()).toHaveLength(2); // nothing removed before the confirmation
    await confirm.getByRole('button', { name: 'Remove' }).click();
    await gh.waitFor({ state: 'detached', timeout: 20_000 });
    expect((await store.list()).map((s) => s.name)).toEqual(['registry']);
    await expect(store.resolve(['gh'])).rejects.toThrow(/no secret named "gh"/);

    // A secret a host command prints (added with the CLI) is listed with its command, never run by listing.
    await store.setCommand({ name: 'fetched', hosts: ['api.airlock.test'], forms: [{ type: 'bearer' }], command: { argv: ['gh', 'auth', 'token'], ttlSeconds: 600 } });
    await page.getByRole('button', { name: 'Secrets' }).click();
    await page.reload();
    await page.getByRole('button', { name: 'Secrets' }).click();
    const fetched = page.locator('tr[data-secret="fetched"]');
    await fetched.waitFor({ timeout: 20_000 });
    expect(await fetched.textContent()).toContain('fetched by gh auth token when a run needs it, held 600 s');
    expect(await fetched.textContent()).not.toContain('no value in the keychain');
    await store.remove('fetched');
    await store.remove('registry');
  }, 120_000);
});
