import { useEffect, useMemo, useRef } from 'react';
import type { McpAnswer, McpApprovalEvent, RunEvent } from '../../../contracts';
import { api, errorMessage } from '../api';
import { useAction } from '../hooks/use-action';
import { useAppStore } from '../stores/app-store';

const LABELS: Record<McpAnswer, string> = {
  once: 'Allow once',
  run: 'Allow this tool for this run',
  deny: 'Deny',
};

/** The MCP calls still waiting: asked (typed host events) and not yet resolved. */
export function openMcpQuestions(events: readonly RunEvent[]): McpApprovalEvent[] {
  const open = new Map<string, McpApprovalEvent>();
  for (const e of events) {
    if (e.event.type === 'mcp_approval') open.set(e.event.id, e.event);
    else if (e.event.type === 'mcp_approval_resolved') open.delete(e.event.id);
  }
  return [...open.values()];
}

function Question({ runId, q }: { runId: string; q: McpApprovalEvent }) {
  const { busy, run } = useAction();
  const box = useRef<HTMLDivElement>(null);
  // Focus on the box, not an answer: a stray Enter must not allow.
  useEffect(() => box.current?.focus(), [q.id]);
  const answer = (a: McpAnswer) => run(async () => {
    const { answered } = await api().call('runs:answerMcp', { runId, id: q.id, answer: a });
    if (!answered) useAppStore.getState().notify('info', 'That call is no longer waiting (it timed out or was closed).');
  }, (err) => {
    useAppStore.getState().notify('error', errorMessage(err));
    return true;
  });
  return (
    <div className="approval" role="alertdialog" aria-label="Allow MCP tool call" tabIndex={-1} ref={box} data-question={q.id}>
      <div className="stack" style={{ gap: 4, flex: '1 1 320px' }}>
        <span>The agent calls the MCP tool <code>{q.server}/{q.tool}</code></span>
        {q.why !== 'policy' && (
          <span>
            <strong>{q.why === 'changed' ? 'Its description changed since you enabled the server' : 'It was not among the tools you enabled'}</strong>; now (the server&apos;s words): <q aria-label="Tool description">{q.description}</q>
          </span>
        )}
        {/* The agent's own arguments: shown as such. */}
        <span className="muted">Arguments (written by the agent): <code aria-label="Arguments">{q.args}</code></span>
      </div>
      {q.answers.map((a) => (
        <button key={a} className={`btn${a === 'deny' ? ' danger' : ' primary'}`} onClick={() => void answer(a)} disabled={busy}>
          {LABELS[a]}
        </button>
      ))}
    </div>
  );
}

/** MCP calls waiting for the user, in the run view (docs/architecture.md §20). */
export function McpApprovalPrompts({ runId, events }: { runId: string; events: readonly RunEvent[] }) {
  const open = useMemo(() => openMcpQuestions(events), [events]);
  if (open.length === 0) return null;
  return (
    <div className="stack" aria-label="MCP questions">
      {open.map((q) => <Question key={q.id} runId={runId} q={q} />)}
    </div>
  );
}
