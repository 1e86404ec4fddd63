// @vitest-environment jsdom
import { cleanup, fireEvent, render, screen, waitFor, within } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { FakeServices } from '../../../test/support/fake-services';
import { connectFakeApp } from '../../../test/support/renderer-harness';
import { useDiffStore } from '../stores/diff-store';
import { useDoctorStore } from '../stores/doctor-store';
import { useAppStore } from '../stores/app-store';
import { useKeysStore } from '../stores/keys-store';
import { useRunsStore } from '../stores/runs-store';
import { DoctorScreen } from './doctor-screen';
import { HistoryScreen } from './history-screen';
import { KeysScreen } from './keys-screen';
import { ReviewScreen } from './review-screen';

/** Apply is enabled once the host has rendered the selection's patch (its digest is what apply sends). */
async function clickApply(label = 'Apply 1 file') {
  await waitFor(() => expect(screen.getByText(label).closest('button')?.disabled).toBe(false));
  fireEvent.click(screen.getByText(label));
}

describe('screens (jsdom, fake services through the real router)', () => {
  let services: FakeServices;
  let disconnect: () => void;
  beforeEach(() => {
    ({ services, disconnect } = connectFakeApp({ autoFinish: true }));
    useKeysStore.setState({ keys: [], providers: [], tests: {} });
    useDoctorStore.setState({ report: undefined, progress: undefined });
    useDiffStore.setState({ files: {}, diffs: {} });
  });
  afterEach(() => {
    cleanup();
    disconnect();
  });

  it('keys: a saved key shows as its last 4 only, and the field is emptied', async () => {
    render(<KeysScreen />);
    await waitFor(() => expect(screen.queryAllByText('Add key').length > 0).toBe(true));
    const row = document.querySelector('tr[data-provider="openai"]') as HTMLElement;
    fireEvent.click(within(row).getByText('Add key'));
    const input = within(row).getByLabelText('OpenAI API key') as HTMLInputElement;
    expect(input.type).toBe('password');
    fireEvent.change(input, { target: { value: 'sk-proj-very-secret-4321' } });
    fireEvent.click(within(row).getByText('Save'));
    await waitFor(() => expect(row.textContent?.includes('••••4321') ?? false).toBe(true));
    expect(document.body.innerHTML).not.toContain('very-secret');
    // With a key and no run yet, the screen points to the next step.
    await waitFor(() => expect(screen.queryByRole('note', { name: 'Next step' }) !== null).toBe(true));
    useAppStore.setState({ route: { name: 'keys' } });
    fireEvent.click(within(screen.getByRole('note', { name: 'Next step' })).getByText('Start a first run'));
    expect(useAppStore.getState().route).toEqual({ name: 'new' });
  });

  it('doctor: a check that is not ok shows its fix and the build button, with progress while building', async () => {
    render(<DoctorScreen />);
    await waitFor(() => expect(screen.queryByText(/Build the image \(about a minute\)/) !== null).toBe(true));
    fireEvent.click(screen.getByText('Build the sandbox image'));
    await waitFor(() => expect(services.calls.some((c) => c.channel === 'sandboxes:buildImage')).toBe(true));
    await waitFor(() => expect(useDoctorStore.getState().building === false).toBe(true));
    expect(useDoctorStore.getState().progress?.phase).toBe('done');
  });

  it('doctor: the debug log shows the errors Airlock handled by itself when opened', async () => {
    render(<DoctorScreen />);
    const panel = screen.getByLabelText('Debug log') as HTMLDetailsElement;
    expect(services.calls.some((c) => c.channel === 'sandboxes:debugLog')).toBe(false);
    panel.open = true;
    fireEvent(panel, new Event('toggle'));
    await waitFor(() => expect(panel.textContent).toContain('sandbox.destroy: the engine did not answer'));
  });

  it('review: risky files are listed first with their reason and are not selected', async () => {
    const run = await useRunsStore.getState().start({ projectDir: '/p', task: 't', provider: 'anthropic', model: 'm' });
    await waitFor(() => expect(useRunsStore.getState().runs[run.id]?.status === 'done' || services.calls.length > 0).toBe(true));
    render(<ReviewScreen runId={run.id} />);
    await waitFor(() => expect(document.querySelectorAll('.file-row').length === 2).toBe(true));
    const rows = [...document.querySelectorAll('.file-row')] as HTMLElement[];
    expect(rows[0]?.dataset.path).toBe('.github/workflows/ci.yml');
    expect(rows[0]?.textContent).toContain('CI workflow');
    expect((within(rows[0]!).getByRole('checkbox') as HTMLInputElement).checked).toBe(false);
    expect((within(rows[1]!).getByRole('checkbox') as HTMLInputElement).checked).toBe(true);
    await clickApply();
    await waitFor(() => expect(services.calls.some((c) => c.channel === 'diffs:apply')).toBe(true));
    expect(services.calls.find((c) => c.channel === 'diffs:apply')?.args).toMatchObject({ files: ['README.md'], mode: 'working-tree', reviewedSha256: 'ab'.repeat(32) });
    await waitFor(() => expect(screen.queryByText(/Applied 1 file/) !== null).toBe(true));
  });

  it('review: ticking a risky file asks first; Cancel leaves it out, Include takes it', async () => {
    const run = await useRunsStore.getState().start({ projectDir: '/p', task: 't', provider: 'anthropic', model: 'm' });
    await waitFor(() => expect(useRunsStore.getState().runs[run.id]?.status === 'done' || services.calls.length > 0).toBe(true));
    render(<ReviewScreen runId={run.id} />);
    await waitFor(() => expect(document.querySelectorAll('.file-row').length === 2).toBe(true));
    const box = () => screen.getByLabelText('apply .github/workflows/ci.yml') as HTMLInputElement;
    fireEvent.click(box());
    const ask = screen.getByRole('alertdialog');
    expect(ask.textContent).toContain('CI workflow');
    expect(box().checked).toBe(false);
    fireEvent.click(within(ask).getByText('Cancel'));
    expect(screen.queryByRole('alertdialog')).toBeNull();
    expect(box().checked).toBe(false);
    fireEvent.click(box());
    fireEvent.click(within(screen.getByRole('alertdialog')).getByText('Include'));
    expect(box().checked).toBe(true);
    await waitFor(() => expect(screen.getByText('Apply 2 files').closest('button')?.disabled).toBe(false));
  });

  it('review: a branch apply sends the commit message (prefilled with the task), and a re-apply offers a free branch name', async () => {
    const run = await useRunsStore.getState().start({ projectDir: '/p', task: 'Add a greeting to the README', provider: 'anthropic', model: 'm' });
    await waitFor(() => expect(useRunsStore.getState().runs[run.id]?.status === 'done' || services.calls.length > 0).toBe(true));
    render(<ReviewScreen runId={run.id} />);
    await waitFor(() => expect(document.querySelectorAll('.file-row').length === 2).toBe(true));
    fireEvent.click(screen.getByLabelText(/New branch with a commit/));
    const message = screen.getByLabelText('Commit message') as HTMLTextAreaElement;
    expect(message.value).toBe('Add a greeting to the README');
    fireEvent.change(message, { target: { value: 'Greet readers\n\nBody text' } });
    const branch = (screen.getByLabelText('Branch name') as HTMLInputElement).value;
    await clickApply();
    await waitFor(() => expect(screen.queryByText(/Applied 1 file on branch/) !== null).toBe(true));
    expect(services.calls.find((c) => c.channel === 'diffs:apply')?.args).toMatchObject({ mode: 'branch', branch, message: 'Greet readers\n\nBody text' });
    expect(screen.getByText(/as Test User <test@example.invalid>/)).toBeTruthy();

    // Again to the same branch: the old success line goes, the refusal names a free name to use.
    await clickApply();
    await waitFor(() => expect(screen.queryByText(`Use ${branch}-2`) !== null).toBe(true));
    expect(screen.queryByText(/Applied 1 file on branch/)).toBeNull();
    expect(document.body.textContent).toContain(`Branch '${branch}' already exists`);
    fireEvent.click(screen.getByText(`Use ${branch}-2`));
    expect((screen.getByLabelText('Branch name') as HTMLInputElement).value).toBe(`${branch}-2`);
    await clickApply();
    await waitFor(() => expect(screen.queryByText(new RegExp(`on branch ${branch}-2`)) !== null).toBe(true));
  });

  it('history and review: a run applied to a branch says so, and where', async () => {
    const run = await useRunsStore.getState().start({ projectDir: '/p', task: 'greet', provider: 'anthropic', model: 'm' });
    await waitFor(() => expect(useRunsStore.getState().runs[run.id]?.status).toBe('done'));
    await services.diffs.apply({ runId: run.id, mode: 'branch', branch: 'airlock/shown', reviewedSha256: 'ab'.repeat(32) });
    render(<HistoryScreen />);
    await waitFor(() => expect(document.querySelector(`tr[data-run="${run.id}"]`)?.textContent).toContain('applied → airlock/shown'));
    cleanup();
    render(<ReviewScreen runId={run.id} />);
    await waitFor(() => expect(screen.getByLabelText('Applied status').textContent).toMatch(/^Applied to branch airlock\/shown of \/p \([12] files?/));
  });
});
