// @vitest-environment jsdom
import { cleanup, render, screen, waitFor } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RunEvent } from '../../../contracts';
import { connectFakeApp } from '../../../test/support/renderer-harness';
import { api } from '../api';
import { useRunsStore } from '../stores/runs-store';
import { RunReport } from './run-report';
import { TranscriptView } from './transcript-view';

const calls = (runId: string): RunEvent[] => [
  { runId, seq: 10, at: '2026-01-01T10:00:00.000Z', event: { type: 'mcp_call', server: 'linear', tool: 'list_issues', decision: 'allow', by: 'policy', isError: false, durationMs: 12 } },
  { runId, seq: 11, at: '2026-01-01T10:00:01.000Z', event: { type: 'mcp_call', server: 'linear', tool: 'delete_issue', decision: 'deny', by: 'user', reason: 'the user refused', isError: true, durationMs: 4200 } },
  { runId, seq: 12, at: '2026-01-01T10:00:02.000Z', event: { type: 'mcp_call', server: 'docs', tool: 'search', decision: 'allow', by: 'user', isError: true, durationMs: 30 } },
];

/** MCP calls (docs/architecture.md §20) in the run view's timeline and in the run report: server, tool, decision, by whom, duration, error. */
describe('MCP calls in the run view and the run report (jsdom)', () => {
  let disconnect: () => void;
  beforeEach(() => ({ disconnect } = connectFakeApp({ autoFinish: true })));
  afterEach(() => {
    cleanup();
    disconnect();
  });

  it('the timeline shows each call with its decision, who decided, how long and an error', () => {
    render(<TranscriptView events={calls('r-1')} />);
    const log = screen.getByRole('log', { name: 'Transcript' });
    const items = [...log.querySelectorAll('[data-mcp-call]')].map((e) => e.textContent);
    expect(items).toEqual([
      'MCP linear › list_issues allowed by policy · 12 ms',
      'MCP linear › delete_issue denied by user · 4.2 s — the user refused',
      'MCP docs › search allowed by user · 30 ms · the server answered with an error',
    ]);
  });

  it("the run report lists the run's servers and every call", async () => {
    const started = await useRunsStore.getState().start({ projectDir: '/p', task: 't', provider: 'anthropic', model: 'm', approval: 'auto' });
    await waitFor(() => expect(useRunsStore.getState().runs[started.id]?.status).toBe('done'));
    const record = await api().call('runs:get', { runId: started.id });
    render(<RunReport run={{ ...record, mcpServers: ['linear', 'docs'] }} events={calls(started.id)} />);
    const section = await screen.findByRole('region', { name: 'MCP tool calls' });
    expect(section.textContent).toContain('Servers linear, docs');
    const rows = [...section.querySelectorAll('[data-mcp-call]')].map((e) => e.getAttribute('data-mcp-call'));
    expect(rows).toEqual(['linear/list_issues', 'linear/delete_issue', 'docs/search']);
    expect(section.textContent).toContain('denied by user · 4.2 s — the user refused');
  });

  it('a run without MCP servers has no MCP section in its report', async () => {
    const started = await useRunsStore.getState().start({ projectDir: '/p', task: 't', provider: 'anthropic', model: 'm', approval: 'auto' });
    await waitFor(() => expect(useRunsStore.getState().runs[started.id]?.status).toBe('done'));
    const record = await api().call('runs:get', { runId: started.id });
    render(<RunReport run={record} events={[]} />);
    await screen.findByRole('region', { name: 'Network' });
    expect(screen.queryByRole('region', { name: 'MCP tool calls' })).toBeNull();
  });
});
