// @vitest-environment jsdom
import { cleanup, fireEvent, render, screen, waitFor, within } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AirlockError } from '../../../contracts/errors';
import type { EngineCheckInput, ProviderInfo, Settings } from '../../../contracts';
import type { FakeServices, FakeServicesOptions } from '../../../test/support/fake-services';
import { connectFakeApp } from '../../../test/support/renderer-harness';
import { fittingProvider, servesAgent } from '../lib/provider-fit';
import { useAppStore } from '../stores/app-store';
import { useDoctorStore } from '../stores/doctor-store';
import { useKeysStore } from '../stores/keys-store';
import { useNewRunForm } from '../stores/new-run-form-store';
import { useSettingsStore } from '../stores/settings-store';
import { App } from './app';
import { NewRunScreen } from './new-run-screen';
import { draftOf, patchOf } from '../lib/settings-draft';
import { SettingsScreen } from './settings-screen';

/** The parser's verdict stands in here; the real one (core) is driven by test/e2e/ui-settings.test.ts. */
function refuseFtp(patch: Partial<Settings>): void {
  if (patch.engineHost?.startsWith('ftp://')) throw new AirlockError('INVALID_INPUT', `'${patch.engineHost}' is not an engine address Airlock understands.`, { field: 'engineHost' });
}

const okCheck = async (input: EngineCheckInput) => ({
  check: { id: 'docker.engine', label: 'Container engine', status: 'ok' as const, detail: 'Docker 27.5.1 on the local socket /var/run/docker.sock' },
  engine: { kind: 'docker' as const, version: '27.5.1', apiVersion: '1.47', address: input.engineHost || 'unix:///var/run/docker.sock', transport: 'unix' as const, remote: false, source: 'setting', summary: 'Docker 27.5.1 on the local socket /var/run/docker.sock' },
});

const field = (label: string) => screen.getByLabelText(label) as HTMLInputElement & HTMLSelectElement;

describe('Settings screen (jsdom, fake services through the real router)', () => {
  let services: FakeServices;
  let disconnect: () => void;
  const connect = async (opts: FakeServicesOptions = {}) => {
    ({ services, disconnect } = connectFakeApp({ autoFinish: true, checkSettings: refuseFtp, checkEngine: okCheck, ...opts }));
    await useSettingsStore.getState().load();
  };
  beforeEach(() => {
    sessionStorage.clear();
    useNewRunForm.setState({ draft: useNewRunForm.getInitialState().draft, seeded: false, againFrom: undefined });
    useAppStore.setState({ route: { name: 'new' }, notices: [], booting: false });
  });
  afterEach(() => {
    cleanup();
    disconnect();
  });

  it('is in the sidebar and lists every setting with what it does and when it takes effect', async () => {
    await connect();
    render(<App />);
    fireEvent.click(screen.getByRole('button', { name: /Settings/ }));
    const form = await screen.findByRole('form', { name: 'Settings' });
    for (const label of ['Engine', 'Engine address', 'Insecure engines', 'Agent', 'Commands', 'Isolation', 'Network', 'Time limit', 'Git history', 'VM accelerator', 'Theme', 'Notifications', 'Transcripts']) {
      const control = within(form).getByLabelText(label);
      // Each has its one-line explanation, saying when it applies.
      const hint = document.getElementById(`${control.id}-hint`);
      expect(hint?.textContent, label).toMatch(/Takes effect:|Not in this session/);
    }
    expect(document.getElementById('s-engine-host-hint')?.textContent).toContain('from the next sandbox; runs in progress keep the engine they started on');
    expect(field('Insecure engines').checked).toBe(false);
  });

  it('lists the project bases kept on the engine beside prepared environments, and Clear removes them too', async () => {
    let listed = [
      { project: '/home/u/big-project', volume: 'airlock-base-aa-01', files: 12000, sizeBytes: 150 * 1024 * 1024, createdAt: '2026-12-01T10:00:00.000Z', projectExists: true },
      { project: '/home/u/gone', volume: 'airlock-base-bb-02', files: 3000, sizeBytes: 20 * 1024 * 1024, createdAt: '2026-11-01T10:00:00.000Z', projectExists: false },
    ];
    let pruned = 0;
    ({ services, disconnect } = connectFakeApp({ autoFinish: true, checkSettings: refuseFtp, checkEngine: okCheck }, (s) => {
      s.environments.list = async () => ({ environments: [], totalBytes: 0, bases: listed });
      s.environments.prune = async () => {
        pruned += 1;
        const removed = listed.map((b) => ({ key: `project base: ${b.project}`, sizeBytes: 0 }));
        listed = [];
        return { removed, kept: [], freedBytes: 170 * 1024 * 1024 };
      };
    }));
    await useSettingsStore.getState().load();
    render(<SettingsScreen />);
    const bases = await screen.findByTestId('project-bases');
    expect(bases.textContent).toContain('/home/u/big-project');
    expect(bases.textContent).toMatch(/12,?000 files/);
    expect(within(bases).getAllByRole('listitem')[1]?.textContent).toContain('the folder is gone');
    // No prepared environment, but bases to clear: the button is live and the question names them.
    fireEvent.click(screen.getByRole('button', { name: 'Clear' }));
    const confirm = screen.getByRole('group', { name: 'Confirm clearing prepared environments' });
    expect(confirm.textContent).toContain('2 project base(s)');
    fireEvent.click(within(confirm).getByRole('button', { name: 'Clear' }));
    await waitFor(() => expect(screen.queryByTestId('project-bases')).toBeNull());
    expect(pruned).toBe(1);
    expect(screen.getByRole('status').textContent).toContain('Removed 2');
  });

  it('a bad engine address is an error on its field and nothing is saved; a good one is saved with the rest', async () => {
    await connect();
    render(<SettingsScreen />);
    fireEvent.change(field('Engine address'), { target: { value: 'ftp://build-box' } });
    fireEvent.change(field('Theme'), { target: { value: 'dark' } });
    fireEvent.click(screen.getByRole('button', { name: 'Save settings' }));
    const problem = await screen.findByText(/is not an engine address Airlock understands/);
    expect(problem.id).toBe('s-engine-host-problem');
    expect(field('Engine address').getAttribute('aria-invalid')).toBe('true');
    expect(await services.settings.get({})).toMatchObject({ theme: 'system' });
    expect((await services.settings.get({})).engineHost).toBeUndefined();

    fireEvent.change(field('Engine address'), { target: { value: 'unix:///var/run/docker.sock' } });
    expect(screen.queryByText(/is not an engine address/)).toBeNull();
    fireEvent.change(field('Engine'), { target: { value: 'docker' } });
    fireEvent.click(screen.getByRole('button', { name: 'Save settings' }));
    await waitFor(async () => expect(await services.settings.get({})).toMatchObject({ theme: 'dark', engine: 'docker', engineHost: 'unix:///var/run/docker.sock' }));
    // Saved: nothing left to save.
    await waitFor(() => expect((screen.getByRole('button', { name: 'Save settings' }) as HTMLButtonElement).disabled).toBe(true));
  });

  it('Check connection checks the values entered (not saved) and shows the engine, local or remote', async () => {
    await connect();
    render(<SettingsScreen />);
    fireEvent.change(field('Engine address'), { target: { value: 'unix:///var/run/docker.sock' } });
    fireEvent.click(screen.getByRole('button', { name: 'Check connection' }));
    const result = await screen.findByTestId('engine-check');
    expect(result.textContent).toContain('Docker 27.5.1');
    expect(result.textContent).toContain('local');
    expect(services.calls.filter((c) => c.channel === 'settings:checkEngine').at(-1)?.args).toMatchObject({ engineHost: 'unix:///var/run/docker.sock', engine: 'auto', engineAllowInsecure: false });
    expect((await services.settings.get({})).engineHost).toBeUndefined();
    // Editing the address clears the old result.
    fireEvent.change(field('Engine address'), { target: { value: 'ssh://me@build-box' } });
    expect(screen.queryByTestId('engine-check')).toBeNull();
  });

  it('a failed check shows the error and what to do; a bad address is a field error', async () => {
    await connect({
      checkEngine: async (input) => {
        if (input.engineHost?.startsWith('ftp://')) throw new AirlockError('INVALID_INPUT', 'not an engine address', { field: 'engineHost' });
        return { check: { id: 'docker.engine', label: 'Container engine', status: 'fail', detail: 'The container engine at unix:///nope.sock is not answering (ENOENT).', fix: 'Start the engine.' } };
      },
    });
    render(<SettingsScreen />);
    fireEvent.change(field('Engine address'), { target: { value: 'unix:///nope.sock' } });
    fireEvent.click(screen.getByRole('button', { name: 'Check connection' }));
    const result = await screen.findByTestId('engine-check');
    expect(result.textContent).toContain('not answering');
    expect(result.textContent).toContain('What to do: Start the engine.');
    fireEvent.change(field('Engine address'), { target: { value: 'ftp://x' } });
    fireEvent.click(screen.getByRole('button', { name: 'Check connection' }));
    expect((await screen.findByRole('alert')).id).toBe('s-engine-host-problem');
  });

  it('allowing insecure engines asks first and says why; Keep them refused leaves it off', async () => {
    await connect();
    render(<SettingsScreen />);
    fireEvent.click(field('Insecure engines'));
    const ask = screen.getByRole('alertdialog', { name: 'Allow insecure engine connections?' });
    expect(ask.textContent).toContain('anyone on the network who reaches its port can run containers as root');
    fireEvent.click(within(ask).getByRole('button', { name: 'Keep them refused' }));
    expect(screen.queryByRole('alertdialog')).toBeNull();
    expect(field('Insecure engines').checked).toBe(false);

    fireEvent.click(field('Insecure engines'));
    fireEvent.click(screen.getByRole('button', { name: 'Allow insecure engines' }));
    expect(field('Insecure engines').checked).toBe(true);
    fireEvent.click(screen.getByRole('button', { name: 'Save settings' }));
    await waitFor(async () => expect((await services.settings.get({})).engineAllowInsecure).toBe(true));
    // Turning it off needs no confirmation.
    fireEvent.click(field('Insecure engines'));
    expect(screen.queryByRole('alertdialog')).toBeNull();
    expect(field('Insecure engines').checked).toBe(false);
  });

  it('git history, time limit, accelerator, transcripts; bad numbers are field errors; new defaults fill the New run form', async () => {
    await connect();
    render(<SettingsScreen />);
    fireEvent.change(field('Time limit'), { target: { value: '0' } });
    fireEvent.click(screen.getByRole('button', { name: 'Save settings' }));
    expect((await screen.findByRole('alert')).textContent).toContain('from 1 minute');
    expect(services.calls.some((c) => c.channel === 'settings:update')).toBe(false);

    fireEvent.change(field('Time limit'), { target: { value: '45' } });
    fireEvent.change(field('Git history'), { target: { value: 'commits' } });
    fireEvent.change(field('Number of commits'), { target: { value: '200' } });
    fireEvent.change(field('VM accelerator'), { target: { value: 'tcg' } });
    fireEvent.change(field('Agent'), { target: { value: 'claude-code' } });
    fireEvent.change(field('Network'), { target: { value: 'allowlist' } });
    fireEvent.click(field('Transcripts'));
    fireEvent.click(field('Notifications'));
    fireEvent.click(screen.getByRole('button', { name: 'Save settings' }));
    await waitFor(async () =>
      expect(await services.settings.get({})).toMatchObject({ defaultTimeoutSec: 2700, gitHistory: 200, vmAccel: 'tcg', defaultAgent: 'claude-code', defaultNetwork: 'allowlist', transcripts: true, notifications: false }),
    );
    expect(useNewRunForm.getState().draft).toMatchObject({ agent: 'claude-code', network: 'allowlist', timeoutMin: '45' });

    fireEvent.change(field('Git history'), { target: { value: 'none' } });
    fireEvent.click(screen.getByRole('button', { name: 'Save settings' }));
    await waitFor(async () => expect((await services.settings.get({})).gitHistory).toBe('none'));
  });

  it('sends only what changed, and follows settings saved elsewhere for fields not edited here', async () => {
    await connect();
    const s = useSettingsStore.getState().settings!;
    expect(patchOf(draftOf(s), s)).toEqual({ patch: {} });
    expect(patchOf({ ...draftOf(s), engineHost: ' ssh://me@box ' }, s)).toEqual({ patch: { engineHost: 'ssh://me@box' } });
    render(<SettingsScreen />);
    fireEvent.change(field('Engine address'), { target: { value: 'ssh://me@box' } });
    await useSettingsStore.getState().update({ theme: 'dark' }); // the sidebar's theme toggle
    await waitFor(() => expect(field('Theme').value).toBe('dark'));
    expect(field('Engine address').value).toBe('ssh://me@box');
  });
});

const SUBSCRIPTIONS: ProviderInfo[] = [
  { id: 'claude-subscription', label: 'Claude subscription (Claude Code only)', kind: 'anthropic', baseUrl: 'https://api.anthropic.com', requiresKey: true, builtin: true, models: ['claude-sonnet-4-5'], hasKey: true, credential: { kind: 'claude-subscription', agent: 'claude-code' } },
  { id: 'chatgpt-signin', label: 'ChatGPT sign-in (Codex CLI only)', kind: 'openai', baseUrl: 'https://chatgpt.com/backend-api/codex', requiresKey: true, builtin: true, models: ['gpt-5-codex'], hasKey: true, credential: { kind: 'chatgpt-signin', agent: 'codex' } },
];

describe('New run form: providers by agent (jsdom, fake services through the real router)', () => {
  let services: FakeServices;
  let disconnect: () => void;
  beforeEach(async () => {
    sessionStorage.clear();
    ({ services, disconnect } = connectFakeApp({ autoFinish: true, providers: SUBSCRIPTIONS }));
    useKeysStore.setState({ keys: [], providers: [], tests: {} });
    useDoctorStore.setState({ report: { ready: true, checkedAt: new Date().toISOString(), checks: [] }, checking: false });
    useNewRunForm.setState({ draft: useNewRunForm.getInitialState().draft, seeded: false, againFrom: undefined });
    useAppStore.setState({ route: { name: 'new' }, notices: [], booting: false });
    await useSettingsStore.getState().load();
  });
  afterEach(() => {
    cleanup();
    disconnect();
  });

  const offered = () => Array.from((screen.getByLabelText('Provider and model') as HTMLSelectElement).options).filter((o) => o.value).map((o) => o.value);

  it('the rule: a subscription serves only its agent; API keys serve all', () => {
    const [claude, chatgpt] = SUBSCRIPTIONS as [ProviderInfo, ProviderInfo];
    expect(servesAgent(claude, 'claude-code')).toBe(true);
    expect(servesAgent(claude, 'builtin')).toBe(false);
    expect(servesAgent(claude, 'codex')).toBe(false);
    expect(servesAgent(chatgpt, 'codex')).toBe(true);
    expect(servesAgent(chatgpt, 'custom')).toBe(false);
    expect(servesAgent({}, 'custom')).toBe(true);
    expect(fittingProvider(SUBSCRIPTIONS, 'builtin', 'claude-subscription')).toBeUndefined();
    expect(fittingProvider(SUBSCRIPTIONS, 'codex', 'claude-subscription')?.id).toBe('chatgpt-signin');
  });

  it('offers each subscription only with its agent, and switches away when the agent no longer fits', async () => {
    await services.keys.set({ provider: 'openai', key: 'sk-test-0000000000000000', storage: 'session' });
    render(<NewRunScreen />);
    await waitFor(() => expect(offered()).toContain('openai'));
    expect(offered()).toEqual(['anthropic', 'openai']);

    fireEvent.change(screen.getByLabelText('Agent'), { target: { value: 'claude-code' } });
    expect(offered()).toEqual(['anthropic', 'openai', 'claude-subscription']);
    fireEvent.change(screen.getByLabelText('Provider and model'), { target: { value: 'claude-subscription' } });
    expect(useNewRunForm.getState().draft.provider).toBe('claude-subscription');

    fireEvent.change(screen.getByLabelText('Agent'), { target: { value: 'codex' } });
    expect(offered()).toEqual(['anthropic', 'openai', 'chatgpt-signin']);
    // The Claude subscription does not serve Codex: the form takes the first usable provider for it.
    await waitFor(() => expect(useNewRunForm.getState().draft.provider).toBe('openai'));
    expect(useNewRunForm.getState().draft.model).toBe('gpt-5');
    expect(screen.getByTestId('provider-switched').textContent).toBe('Claude subscription (Claude Code only) serves only Claude Code; switched to OpenAI for the Codex CLI.');

    fireEvent.change(screen.getByLabelText('Agent'), { target: { value: 'builtin' } });
    expect(offered()).not.toContain('chatgpt-signin');
    expect(useNewRunForm.getState().draft.provider).toBe('openai');
    expect(screen.queryByTestId('provider-switched')).toBeNull();
  });

  it('with only a subscription set up, another agent is told no provider is configured, with Add a key', async () => {
    useNewRunForm.setState({ draft: { ...useNewRunForm.getInitialState().draft, agent: 'claude-code', provider: 'claude-subscription', model: 'claude-sonnet-4-5' }, seeded: true });
    render(<NewRunScreen />);
    await waitFor(() => expect(offered()).toContain('claude-subscription'));
    expect(screen.queryByTestId('no-provider')).toBeNull();
    fireEvent.change(screen.getByLabelText('Agent'), { target: { value: 'builtin' } });
    // Anthropic and OpenAI fit but have no key: the form says so and offers the fix.
    const none = await screen.findByTestId('no-provider');
    expect(none.textContent).toContain('No provider with a key serves the Built-in agent.');
    expect(useNewRunForm.getState().draft.provider).toBe('anthropic');
    fireEvent.click(within(none).getByRole('button', { name: 'Add a key' }));
    expect(useAppStore.getState().route).toEqual({ name: 'keys' });
  });
});
