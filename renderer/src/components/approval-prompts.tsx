import { useEffect, useMemo, useRef, type ReactNode } from 'react';
import type { McpAnswer, McpApprovalEvent, NetworkAnswer, NetworkApprovalEvent, RunEvent } from '../../../contracts';
import { errorMessage } from '../api';
import { useRunsStore } from '../stores/runs-store';
import { useAction } from '../hooks/use-action';
import { useAppStore } from '../stores/app-store';

/**
 * The questions a run puts to the user while a request or a tool call waits: network requests and
 * rules the agent proposed (docs/architecture.md §2.8), MCP tool calls (§20). One box for both: the
 * focus, the answers, a failed or late answer; each kind says only what is asked.
 */

type Question = NetworkApprovalEvent | McpApprovalEvent;

/** The questions of one kind still open: asked (typed host events) and not yet resolved. */
function openQuestions<Q extends Question>(events: readonly RunEvent[], asked: Q['type'], resolved: string): Q[] {
  const open = new Map<string, Q>();
  for (const e of events) {
    if (e.event.type === asked) open.set((e.event as Q).id, e.event as Q);
    else if (e.event.type === resolved) open.delete((e.event as { id: string }).id);
  }
  return [...open.values()];
}

export function openNetworkQuestions(events: readonly RunEvent[]): NetworkApprovalEvent[] {
  return openQuestions<NetworkApprovalEvent>(events, 'network_approval', 'network_approval_resolved');
}

export function openMcpQuestions(events: readonly RunEvent[]): McpApprovalEvent[] {
  return openQuestions<McpApprovalEvent>(events, 'mcp_approval', 'mcp_approval_resolved');
}

function QuestionBox<A extends string>({ id, label, answers, labels, primary, send, late, children }: {
  id: string;
  label: string;
  answers: readonly A[];
  labels: Record<A, string>;
  primary: (a: A) => boolean;
  send: (a: A) => Promise<{ answered: boolean }>;
  late: string;
  children: ReactNode;
}) {
  const { busy, run } = useAction();
  const box = useRef<HTMLDivElement>(null);
  // Each new question takes the focus once, on the box and no answer: a stray Enter must not allow.
  useEffect(() => box.current?.focus(), [id]);
  // A failed answer is a notice: the question stays for another try.
  const answer = (a: A) => run(async () => {
    const { answered } = await send(a);
    if (!answered) useAppStore.getState().notify('info', late);
  }, (err) => {
    useAppStore.getState().notify('error', errorMessage(err));
    return true;
  });
  return (
    <div className="approval" role="alertdialog" aria-label={label} tabIndex={-1} ref={box} data-question={id}>
      <div className="stack" style={{ gap: 4, flex: '1 1 320px' }}>{children}</div>
      {answers.map((a) => (
        <button key={a} className={`btn${a === 'deny' ? ' danger' : primary(a) ? ' primary' : ''}`} onClick={() => void answer(a)} disabled={busy}>
          {labels[a]}
        </button>
      ))}
    </div>
  );
}

const NETWORK_LABELS: Record<NetworkAnswer, string> = { once: 'Allow once', run: 'Approve for this run', project: 'Allow for this project', deny: 'Deny' };
const MCP_LABELS: Record<McpAnswer, string> = { once: 'Allow once', run: 'Allow this tool for this run', deny: 'Deny' };

function NetworkQuestion({ runId, q }: { runId: string; q: NetworkApprovalEvent }) {
  const proposal = q.kind === 'proposal';
  return (
    <QuestionBox id={q.id} label={proposal ? 'Approve network rule' : 'Allow network request'} answers={q.answers} labels={NETWORK_LABELS}
      primary={(a) => a === 'once' || a === 'run'} late="That request is no longer waiting (it timed out or was closed)."
      send={(a) => useRunsStore.getState().answerNetwork({ runId, id: q.id, answer: a })}>
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
    </QuestionBox>
  );
}

function McpQuestion({ runId, q }: { runId: string; q: McpApprovalEvent }) {
  return (
    <QuestionBox id={q.id} label="Allow MCP tool call" answers={q.answers} labels={MCP_LABELS} primary={() => true}
      late="That call is no longer waiting (it timed out or was closed)." send={(a) => useRunsStore.getState().answerMcp({ runId, id: q.id, answer: a })}>
      <span>The agent calls the MCP tool <code>{q.server}/{q.tool}</code></span>
      {q.why !== 'policy' && (
        <span>
          <strong>{q.why === 'changed' ? 'Its description changed since you enabled the server' : 'It was not among the tools you enabled'}</strong>; now (the server&apos;s words): <q aria-label="Tool description">{q.description}</q>
        </span>
      )}
      {/* The agent's own arguments: shown as such. */}
      <span className="muted">Arguments (written by the agent): <code aria-label="Arguments">{q.args}</code></span>
    </QuestionBox>
  );
}

/** Requests waiting for the user and rules the agent proposed, in the run view (docs/architecture.md §2.8). */
export function NetworkApprovalPrompts({ runId, events }: { runId: string; events: readonly RunEvent[] }) {
  const open = useMemo(() => openNetworkQuestions(events), [events]);
  if (open.length === 0) return null;
  return <div className="stack" aria-label="Network questions">{open.map((q) => <NetworkQuestion key={q.id} runId={runId} q={q} />)}</div>;
}

/** MCP calls waiting for the user, in the run view (docs/architecture.md §20). */
export function McpApprovalPrompts({ runId, events }: { runId: string; events: readonly RunEvent[] }) {
  const open = useMemo(() => openMcpQuestions(events), [events]);
  if (open.length === 0) return null;
  return <div className="stack" aria-label="MCP questions">{open.map((q) => <McpQuestion key={q.id} runId={runId} q={q} />)}</div>;
}
