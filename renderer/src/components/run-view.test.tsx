// @vitest-environment jsdom
import { cleanup, render, screen, waitFor } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { connectFakeApp } from '../../../test/support/renderer-harness';
import { useRunsStore } from '../stores/runs-store';
import { FileTreeView } from './file-tree-view';
import { RunView } from './run-view';

// xterm needs a canvas jsdom lacks; the terminal is covered in Chromium (test/e2e/ui-terminal.test.ts).
vi.mock('./terminal-panel', () => ({ TerminalPanel: () => null }));

describe('run view of a finished run (jsdom, fake services through the real router)', () => {
  let disconnect: () => void;
  beforeEach(() => ({ disconnect } = connectFakeApp({ autoFinish: true })));
  afterEach(() => {
    cleanup();
    disconnect();
  });

  it('times the whole run from its request (setup included) and shows its result first', async () => {
    const run = await useRunsStore.getState().start({ projectDir: '/p', task: 'time me', provider: 'anthropic', model: 'm', approval: 'auto' });
    await waitFor(() => expect(useRunsStore.getState().runs[run.id]?.status).toBe('done'));
    render(<RunView runId={run.id} />);
    const changes = await screen.findByLabelText('Changes');
    // A 25 s run whose agent started 2 s before the end (23 s of setup); set once the view has fetched the run.
    const end = Date.parse(useRunsStore.getState().runs[run.id]!.endedAt!);
    await waitFor(() => expect(screen.queryByText('Loading run…')).toBeNull());
    useRunsStore.setState((s) => ({ runs: { ...s.runs, [run.id]: { ...s.runs[run.id]!, createdAt: new Date(end - 25_000).toISOString(), startedAt: new Date(end - 2_000).toISOString() } } }));
    const elapsed = await screen.findByLabelText('Elapsed');
    await waitFor(() => expect(elapsed.textContent).toBe('0:25'));
    expect(elapsed.getAttribute('title')).toContain('the agent: 0:02');
    expect(changes.textContent).toContain('README.md');
    // The result sits above the transcript and terminal.
    const transcript = screen.getByLabelText('Agent');
    expect(changes.compareDocumentPosition(transcript) & Node.DOCUMENT_POSITION_FOLLOWING).toBeTruthy();
  });

  it('a finished run with no changes says so, without "yet"', () => {
    render(<FileTreeView files={[]} onSelect={() => undefined} final />);
    expect(screen.getByText('The run changed no files.')).toBeTruthy();
    cleanup();
    render(<FileTreeView files={[]} onSelect={() => undefined} />);
    expect(screen.getByText('No changed files yet.')).toBeTruthy();
  });
});
