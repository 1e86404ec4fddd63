// @vitest-environment jsdom
import { cleanup, fireEvent, render, screen, waitFor } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RunEvent } from '../../../contracts';
import { connectFakeApp } from '../../../test/support/renderer-harness';
import type { FakeServices } from '../../../test/support/fake-services';
import { useAppStore } from '../stores/app-store';
import { useRunsStore } from '../stores/runs-store';
import { McpApprovalPrompts, NetworkApprovalPrompts, openMcpQuestions, openNetworkQuestions } from './approval-prompts';

const at = '2026-01-01T10:00:00.000Z';
const expiresAt = '2026-01-01T10:02:00.000Z';
const events = (runId: string): RunEvent[] => [
  { runId, seq: 1, at, event: { type: 'network_approval', id: 'n1', kind: 'request', host: 'api.example.com', port: 443, method: 'POST', path: '/v1', deniedBy: 'rule 1', answers: ['once', 'run', 'project', 'deny'], expiresAt } },
  { runId, seq: 2, at, event: { type: 'network_approval', id: 'n2', kind: 'proposal', host: 'x', port: 443, method: 'GET', path: '/', rule: 'x read-only', reason: 'docs', answers: ['once', 'deny'], expiresAt } },
  { runId, seq: 3, at, event: { type: 'network_approval_resolved', id: 'n2', answer: 'deny', by: 'user' } },
  { runId, seq: 4, at, event: { type: 'mcp_approval', id: 'm1', server: 'linear', tool: 'delete_issue', why: 'changed', description: 'Now deletes everything.', args: '{"id":"1"}', answers: ['once', 'run', 'deny'], expiresAt } },
];

/** One question box for network and MCP questions (docs/architecture.md §2.8, §20): open ones only, focus on the box, answers sent. */
describe('approval prompts (jsdom, fake services through the real router)', () => {
  let disconnect: () => void;
  let services: FakeServices;
  beforeEach(() => ({ disconnect, services } = connectFakeApp({ autoFinish: true })));
  afterEach(() => {
    cleanup();
    disconnect();
  });

  it('lists only the questions still open, of each kind', () => {
    expect(openNetworkQuestions(events('r-1')).map((q) => q.id)).toEqual(['n1']);
    expect(openMcpQuestions(events('r-1')).map((q) => q.id)).toEqual(['m1']);
  });

  it('shows each kind in the one box, focused on the box, and sends the answer to its own channel', async () => {
    const run = await useRunsStore.getState().start({ projectDir: '/p', task: 't', provider: 'anthropic', model: 'm', approval: 'auto' });
    render(<><NetworkApprovalPrompts runId={run.id} events={events(run.id)} /><McpApprovalPrompts runId={run.id} events={events(run.id)} /></>);
    const net = screen.getByRole('alertdialog', { name: 'Allow network request' });
    expect(net.textContent).toContain('POST https://api.example.com/v1');
    expect([...net.querySelectorAll('button')].map((b) => b.textContent)).toEqual(['Allow once', 'Approve for this run', 'Allow for this project', 'Deny']);
    expect(screen.queryByRole('alertdialog', { name: 'Approve network rule' })).toBeNull();
    const mcp = screen.getByRole('alertdialog', { name: 'Allow MCP tool call' });
    expect(document.activeElement).toBe(mcp);
    expect(mcp.textContent).toContain('Its description changed since you enabled the server');
    expect(screen.getByLabelText('Tool description').textContent).toBe('Now deletes everything.');
    fireEvent.click(screen.getByRole('button', { name: 'Allow this tool for this run' }));
    await waitFor(() => expect(services.calls.some((c) => c.channel === 'runs:answerMcp')).toBe(true));
    expect(services.calls.find((c) => c.channel === 'runs:answerMcp')?.args).toMatchObject({ runId: run.id, id: 'm1', answer: 'run' });
    // The fake says it was no longer waiting: the user is told, nothing pretends it was answered.
    await waitFor(() => expect(useAppStore.getState().notices.map((n) => n.text)).toContain('That call is no longer waiting (it timed out or was closed).'));
    fireEvent.click(net.querySelector('button:last-child')!);
    await waitFor(() => expect(services.calls.find((c) => c.channel === 'runs:answerNetwork')?.args).toMatchObject({ id: 'n1', answer: 'deny' }));
  });
});
