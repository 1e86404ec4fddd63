// @vitest-environment jsdom
import { cleanup, fireEvent, render, screen, waitFor } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { FakeServices } from '../../../test/support/fake-services';
import { connectFakeApp } from '../../../test/support/renderer-harness';
import { useAppStore } from '../stores/app-store';
import { useDiffStore } from '../stores/diff-store';
import { useRunsStore } from '../stores/runs-store';
import { HistoryScreen } from './history-screen';
import { ReviewScreen } from './review-screen';
import { ContinuePanel } from './run-view';

/** Follow-up turns in the UI (docs/architecture.md §15): continue, fork, the thread in History, review by scope. */
describe('threads (jsdom, fake services through the real router)', () => {
  let services: FakeServices;
  let disconnect: () => void;
  beforeEach(() => {
    ({ services, disconnect } = connectFakeApp({ autoFinish: true }));
    useDiffStore.setState({ files: {}, diffs: {}, patchSha256: {} });
  });
  afterEach(() => {
    cleanup();
    disconnect();
  });

  it('continues a finished run from its view, groups the thread in History, offers a fork on the earlier turn, and reviews the turn or the whole thread', async () => {
    const first = await useRunsStore.getState().start({ projectDir: '/p', task: 'write the parser', provider: 'anthropic', model: 'm' });
    await waitFor(() => expect(useRunsStore.getState().runs[first.id]?.status).toBe('done'));

    render(<ContinuePanel runId={first.id} />);
    const button = screen.getByRole('button', { name: 'Follow up' }) as HTMLButtonElement;
    expect(button.disabled).toBe(true);
    fireEvent.change(screen.getByLabelText('Follow-up task'), { target: { value: 'also handle the empty case' } });
    fireEvent.click(button);
    await waitFor(() => expect(services.calls.some((c) => c.channel === 'runs:continue')).toBe(true));
    expect(services.calls.find((c) => c.channel === 'runs:continue')?.args).toEqual({ runId: first.id, task: 'also handle the empty case' });
    // The new turn opens, and it is one thread with the first run.
    await waitFor(() => expect(useAppStore.getState().route).toMatchObject({ name: 'run' }));
    const second = (useAppStore.getState().route as { runId: string }).runId;
    expect(second).not.toBe(first.id);
    expect(useRunsStore.getState().runs[second]?.thread).toMatchObject({ rootRunId: first.id, parentRunId: first.id, turn: 2, conversation: 'carried' });
    await waitFor(() => expect(useRunsStore.getState().runs[second]?.status).toBe('done'));
    cleanup();

    // History: the follow-up sits right under its first run, marked as turn 2.
    render(<HistoryScreen />);
    await waitFor(() => expect(document.querySelectorAll('tr[data-run]').length).toBe(2));
    const rows = [...document.querySelectorAll('tr[data-run]')] as HTMLElement[];
    expect(rows.map((r) => r.dataset.run)).toEqual([first.id, second]);
    expect(rows[0]?.textContent).toContain('thread · 2 turns');
    expect(rows[1]?.textContent).toContain('↳ turn 2');
    expect(rows.every((r) => r.dataset.thread === first.id)).toBe(true);
    cleanup();

    // The earlier turn now offers a fork.
    render(<ContinuePanel runId={first.id} />);
    expect(screen.getByRole('button', { name: 'Fork from here' })).toBeTruthy();
    cleanup();

    // Review of the follow-up: its own change by default, the whole thread on request, applied with that scope.
    render(<ReviewScreen runId={second} />);
    await waitFor(() => expect(document.querySelectorAll('.file-row').length).toBeGreaterThan(0));
    expect(services.calls.some((c) => c.channel === 'diffs:list' && (c.args as { scope?: string }).scope === 'turn')).toBe(true);
    fireEvent.click(screen.getByLabelText(/The whole thread \(turns 1–2\)/));
    await waitFor(() => expect(services.calls.some((c) => c.channel === 'diffs:list' && (c.args as { scope?: string }).scope === 'thread')).toBe(true));
    await waitFor(() => expect(document.querySelectorAll('.file-row').length).toBeGreaterThan(0));
    // Apply is enabled once the host has rendered the selection's patch (its digest is what apply sends).
    await waitFor(() => expect(screen.getByText(/^Apply \d+ files?$/).closest('button')?.disabled).toBe(false));
    fireEvent.click(screen.getByText(/^Apply \d+ files?$/));
    await waitFor(() => expect(services.calls.some((c) => c.channel === 'diffs:apply')).toBe(true));
    expect(services.calls.find((c) => c.channel === 'diffs:apply')?.args).toMatchObject({ runId: second, scope: 'thread' });
  });
});
