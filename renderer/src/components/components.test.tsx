// @vitest-environment jsdom
import { act, cleanup, fireEvent, render, screen, within } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createApiRouter } from '../../../core/api/router';
import { createFakeServices, type FakeServices } from '../../../core/api/testing/fake-services';
import { createApi, setApi } from '../api';
import { connectStores } from '../stores/connect-stores';
import { useDiffStore } from '../stores/diff-store';
import { useDoctorStore } from '../stores/doctor-store';
import { useKeysStore } from '../stores/keys-store';
import { useRunsStore } from '../stores/runs-store';
import { createMemoryTransport } from '../test-support';
import { DoctorScreen } from './doctor-screen';
import { KeysScreen } from './keys-screen';
import { ReviewScreen } from './review-screen';

const until = async (pred: () => boolean) => {
  for (let i = 0; i < 200 && !pred(); i++) await act(() => new Promise((r) => setTimeout(r, 5)));
  if (!pred()) throw new Error('condition not met');
};

describe('screens (jsdom, fake services through the real router)', () => {
  let services: FakeServices;
  let disconnect: () => void;
  beforeEach(() => {
    services = createFakeServices({ autoFinish: true });
    const api = createApi(createMemoryTransport(createApiRouter(services)));
    setApi(api);
    disconnect = connectStores(api);
    useKeysStore.setState({ keys: [], providers: [], tests: {} });
    useDoctorStore.setState({ report: undefined, progress: undefined });
    useRunsStore.setState({ runs: {}, order: [], live: {}, loaded: false });
    useDiffStore.setState({ files: {}, diffs: {} });
  });
  afterEach(() => {
    cleanup();
    disconnect();
  });

  it('keys: a saved key shows as its last 4 only, and the field is emptied', async () => {
    render(<KeysScreen />);
    await until(() => screen.queryAllByText('Add key').length > 0);
    const row = document.querySelector('tr[data-provider="openai"]') as HTMLElement;
    fireEvent.click(within(row).getByText('Add key'));
    const input = within(row).getByLabelText('OpenAI API key') as HTMLInputElement;
    expect(input.type).toBe('password');
    fireEvent.change(input, { target: { value: 'sk-proj-very-secret-4321' } });
    fireEvent.click(within(row).getByText('Save'));
    await until(() => row.textContent?.includes('••••4321') ?? false);
    expect(document.body.innerHTML).not.toContain('very-secret');
  });

  it('doctor: a check that is not ok shows its fix and the build button, with progress while building', async () => {
    render(<DoctorScreen />);
    await until(() => screen.queryByText(/Build the image \(about a minute\)/) !== null);
    fireEvent.click(screen.getByText('Build the sandbox image'));
    await until(() => services.calls.some((c) => c.channel === 'sandboxes:buildImage'));
    await until(() => useDoctorStore.getState().building === false);
    expect(useDoctorStore.getState().progress?.phase).toBe('done');
  });

  it('review: risky files are listed first with their reason and are not selected', async () => {
    const run = await useRunsStore.getState().start({ projectDir: '/p', task: 't', provider: 'anthropic', model: 'm' });
    await until(() => useRunsStore.getState().runs[run.id]?.status === 'done' || services.calls.length > 0);
    await act(() => new Promise((r) => setTimeout(r, 100)));
    render(<ReviewScreen runId={run.id} />);
    await until(() => document.querySelectorAll('.file-row').length === 2);
    const rows = [...document.querySelectorAll('.file-row')] as HTMLElement[];
    expect(rows[0]?.dataset.path).toBe('.github/workflows/ci.yml');
    expect(rows[0]?.textContent).toContain('CI workflow');
    expect((within(rows[0]!).getByRole('checkbox') as HTMLInputElement).checked).toBe(false);
    expect((within(rows[1]!).getByRole('checkbox') as HTMLInputElement).checked).toBe(true);
    fireEvent.click(screen.getByText('Apply 1 file(s)'));
    await until(() => services.calls.some((c) => c.channel === 'diffs:apply'));
    expect(services.calls.find((c) => c.channel === 'diffs:apply')?.args).toMatchObject({ files: ['README.md'], mode: 'working-tree', reviewedSha256: 'ab'.repeat(32) });
    await until(() => screen.queryByText(/Applied 1 file/) !== null);
  });
});
