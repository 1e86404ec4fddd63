// @vitest-environment jsdom
import { cleanup, fireEvent, render, screen, waitFor, within } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { FakeServices } from '../../../test/support/fake-services';
import { connectFakeApp } from '../../../test/support/renderer-harness';
import { useAppStore } from '../stores/app-store';
import { useDoctorStore } from '../stores/doctor-store';
import { useKeysStore } from '../stores/keys-store';
import { useNewRunForm } from '../stores/new-run-form-store';
import { useRunsStore } from '../stores/runs-store';
import { useSettingsStore } from '../stores/settings-store';
import { AuditVerdict, AuditView } from './audit-view';
import { HistoryScreen } from './history-screen';
import { KeysScreen } from './keys-screen';
import { NewRunScreen } from './new-run-screen';

const doctorWith = (vm: { available: boolean; reason: string }) => ({
  ready: true,
  checkedAt: new Date().toISOString(),
  checks: [{ id: 'isolation', label: 'Isolation levels', status: 'warn' as const, detail: 'qemu: no', vm }],
});

describe('history and forms (jsdom, fake services through the real router)', () => {
  let services: FakeServices;
  let disconnect: () => void;
  beforeEach(() => {
    sessionStorage.clear();
    ({ services, disconnect } = connectFakeApp({ autoFinish: true }));
    useKeysStore.setState({ keys: [], providers: [], tests: {} });
    useDoctorStore.setState({ report: doctorWith({ available: true, reason: '' }), checking: false });
    useNewRunForm.setState({ draft: useNewRunForm.getInitialState().draft, seeded: false, againFrom: undefined });
    useAppStore.setState({ route: { name: 'new' } });
  });
  afterEach(() => {
    cleanup();
    disconnect();
  });

  it('the New run form keeps folder and task when leaving the screen and coming back, for the session', async () => {
    const first = render(<NewRunScreen />);
    fireEvent.change(screen.getByLabelText('Project folder'), { target: { value: '/work/app' } });
    fireEvent.change(screen.getByLabelText('Task'), { target: { value: 'fix the flaky test' } });
    first.unmount();
    render(<NewRunScreen />);
    expect((screen.getByLabelText('Project folder') as HTMLInputElement).value).toBe('/work/app');
    expect((screen.getByLabelText('Task') as HTMLTextAreaElement).value).toBe('fix the flaky test');
    expect(sessionStorage.getItem('airlock.new-run-form')).toContain('fix the flaky test');
  });

  it('offers recent projects from settings and picks one', async () => {
    await useSettingsStore.getState().update({ recentProjects: ['/work/one', '/work/two'] });
    render(<NewRunScreen />);
    const recent = screen.getByRole('group', { name: 'Recent projects' });
    fireEvent.click(within(recent).getByText('two'));
    expect((screen.getByLabelText('Project folder') as HTMLInputElement).value).toBe('/work/two');
  });

  it('without a system dialog, Browse opens the host folder browser (names only) and chooses a folder', async () => {
    render(<NewRunScreen />);
    fireEvent.click(screen.getByText('Browse…'));
    const browser = await screen.findByRole('dialog', { name: 'Choose a project folder' });
    fireEvent.click(await within(browser).findByText('code'));
    await waitFor(() => expect(within(browser).getByLabelText('Current folder').textContent).toBe('/home/fake/code'));
    fireEvent.click(within(browser).getByText('Choose this folder'));
    expect((screen.getByLabelText('Project folder') as HTMLInputElement).value).toBe('/home/fake/code');
    expect(services.calls.filter((c) => c.channel === 'projects:pickFolder')).toBeDefined();
  });

  it('shows "Virtual machine" disabled, with the reason, when the setup check says it is unavailable', async () => {
    useDoctorStore.setState({ report: doctorWith({ available: false, reason: 'the VM kernel/initramfs are not prepared' }) });
    render(<NewRunScreen />);
    const option = screen.getByRole('option', { name: /Virtual machine/ }) as HTMLOptionElement;
    expect(option.disabled).toBe(true);
    expect(option.textContent).toBe('Virtual machine (unavailable)');
    expect(screen.getByText(/Virtual machine isolation is not available here: the VM kernel\/initramfs are not prepared/)).toBeTruthy();
  });

  it('Run again from History fills the New run form with the run\'s settings', async () => {
    const run = await useRunsStore.getState().start({ projectDir: '/work/again', task: 'do it again', provider: 'anthropic', model: 'claude-x', isolation: 'container', network: 'open', approval: 'auto', limits: { timeoutSec: 600, budgetTokens: 12_000, budgetUsd: 0.5 } });
    await waitFor(() => expect(useRunsStore.getState().runs[run.id]?.status).toBe('done'));
    render(<HistoryScreen />);
    await screen.findByText('Run again');
    const row = document.querySelector(`tr[data-run="${run.id}"]`) as HTMLElement;
    fireEvent.click(within(row).getByText('Run again'));
    await waitFor(() => expect(useAppStore.getState().route).toEqual({ name: 'new' }));
    expect(useNewRunForm.getState().draft).toMatchObject({ projectDir: '/work/again', task: 'do it again', provider: 'anthropic', model: 'claude-x', network: 'open', approval: 'auto', timeoutMin: '10', budgetTokens: '12000', budgetUsd: '0.5' });
    cleanup();
    render(<NewRunScreen />);
    expect(screen.getByRole('status').textContent).toContain(run.id);
  });

  it('keys: Change URL sends only the new base URL, never a key', async () => {
    render(<KeysScreen />);
    await screen.findAllByText('Change URL');
    const row = document.querySelector('tr[data-provider="openai"]') as HTMLElement;
    fireEvent.click(within(row).getByText('Change URL'));
    fireEvent.change(within(row).getByLabelText('OpenAI new base URL'), { target: { value: 'http://127.0.0.1:4000/v1' } });
    fireEvent.click(within(row).getByText('Save URL'));
    await waitFor(() => expect(services.calls.some((c) => c.channel === 'keys:setBaseUrl')).toBe(true));
    const call = services.calls.find((c) => c.channel === 'keys:setBaseUrl');
    expect(call?.args).toEqual({ provider: 'openai', baseUrl: 'http://127.0.0.1:4000/v1' });
    expect(services.calls.some((c) => c.channel === 'keys:set')).toBe(false);
    await waitFor(() => expect(row.textContent).toContain('http://127.0.0.1:4000/v1'));
  });

  it('the audit view shows the verdict prominently and each record in words', async () => {
    const run = await useRunsStore.getState().start({ projectDir: '/p', task: 't', provider: 'anthropic', model: 'm' });
    await waitFor(() => expect(useRunsStore.getState().runs[run.id]?.status).toBe('done'));
    render(<AuditView runId={run.id} />);
    expect((await screen.findByLabelText('Audit log verified')).textContent).toMatch(/✓ Audit log verified.*records, hash chain intact/);
    expect(document.querySelectorAll('.audit-table tbody tr').length).toBeGreaterThan(0);
  });

  it('a broken audit log says where, prominently', () => {
    render(<AuditVerdict verify={{ runId: 'r-x', intact: false, records: 7, firstBroken: { index: 7, reason: 'hash does not match the record' } }} />);
    const alert = screen.getByRole('alert', { name: 'Audit log broken' });
    expect(alert.textContent).toBe('✗ Audit log broken at record 7hash does not match the record. Records from there on cannot be trusted.');
  });
});
