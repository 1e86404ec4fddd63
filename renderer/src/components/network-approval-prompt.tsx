import { useEffect, useMemo, useRef } from 'react';
import type { NetworkAnswer, NetworkApprovalEvent, RunEvent } from '../../../contracts';
import { api, errorMessage } from '../api';
import { useAction } from '../hooks/use-action';
import { useAppStore } from '../stores/app-store';

const LABELS: Record<NetworkAnswer, string> = {
  once: 'Allow once',
  run: 'Approve for this run',
  project: 'Allow for this project',
  deny: 'Deny',
};

/** The network questions still open: asked (typed host events) and not yet resolved. */
export function openNetworkQuestions(events: readonly RunEvent[]): NetworkApprovalEvent[] {
  const open = new Map<string, NetworkApprovalEvent>();
  for (const e of events) {
    if (e.event.type === 'network_approval') open.set(e.event.id, e.event);
    else if (e.event.type === 'network_approval_resolved') open.delete(e.event.id);
  }
  return [...open.values()];
}

function Question({ runId, q }: { runId: string; q: NetworkApprovalEvent }) {
  const { busy, run } = useAction();
  const box = useRef<HTMLDivElement>(null);
  // Each new question takes the focus once, on the box and neither answer: a stray Enter must not allow.
  useEffect(() => box.current?.focus(), [q.id]);
  // A failed answer is a notice: the question stays for another try.
  const answer = (a: NetworkAnswer) => run(async () => {
    const { answered } = await api().call('runs:answerNetwork', { runId, id: q.id, answer: a });
    if (!answered) useAppStore.getState().notify('info', 'That request is no longer waiting (it timed out or was closed).');
  }, (err) => {
    useAppStore.getState().notify('error', errorMessage(err));
    return true;
  });
  const proposal = q.kind === 'proposal';
  return (
    <div className="approval" role="alertdialog" aria-label={proposal ? 'Approve network rule' : 'Allow network request'} tabIndex={-1} ref={box} data-question={q.id}>
      <div className="stack" style={{ gap: 4, flex: '1 1 320px' }}>
        {proposal ? (
          <>
            <span>The agent proposes the network rule</span>
            <code aria-label="Proposed rule">{q.rule}</code>
            {/* The agent's own words: shown as a quote, never as Airlock's. */}
            <span className="muted">Its reason (written by the agent): <q aria-label="Agent's reason">{q.reason}</q></span>
          </>
        ) : (
          <>
            <span>
              A request is waiting: <code>{q.method} https://{q.host}{q.port === 443 ? '' : `:${q.port}`}{q.path}</code>
            </span>
            <span className="muted">Refused by {q.deniedBy}.{q.rule ? <> Allow for this project adds <code aria-label="Rule to add">{q.rule}</code> to your settings for this project.</> : null}</span>
          </>
        )}
      </div>
      {q.answers.map((a) => (
        <button key={a} className={`btn${a === 'deny' ? ' danger' : a === 'once' || a === 'run' ? ' primary' : ''}`} onClick={() => void answer(a)} disabled={busy}>
          {LABELS[a]}
        </button>
      ))}
    </div>
  );
}

/** Requests waiting for the user and rules the agent proposed, in the run view (docs/architecture.md §2.8). */
export function NetworkApprovalPrompts({ runId, events }: { runId: string; events: readonly RunEvent[] }) {
  const open = useMemo(() => openNetworkQuestions(events), [events]);
  if (open.length === 0) return null;
  return (
    <div className="stack" aria-label="Network questions">
      {open.map((q) => <Question key={q.id} runId={runId} q={q} />)}
    </div>
  );
}
