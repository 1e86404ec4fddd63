import { useEffect, useRef, useState } from 'react';
import { isFinalStatus, type RunRecord } from '../../../contracts';
import { errorMessage } from '../api';
import { useAction } from '../hooks/use-action';
import { summarizeEnvironment } from '../lib/environment-summary';
import { costUnknownWhy, formatElapsed, formatTokens, formatUsd } from '../lib/format';
import { useAppStore } from '../stores/app-store';
import { useDiffStore } from '../stores/diff-store';
import { runAgain } from '../stores/new-run-form-store';
import { useRunsStore } from '../stores/runs-store';
import { CheckpointTimeline } from './checkpoint-timeline';
import { ConfirmInline, ErrorBanner, StatusBadge, useNow } from './common';
import { DiffViewer } from './diff-viewer';
import { FileTreeView } from './file-tree-view';
import { McpApprovalPrompts, NetworkApprovalPrompts } from './approval-prompts';
import { RunNetworkPanel } from './run-network-panel';
import { RunReport } from './run-report';
import { TerminalPanel } from './terminal-panel';
import { TranscriptView } from './transcript-view';

const EMPTY_EVENTS: never[] = [];

function ApprovalPrompt({ runId }: { runId: string }) {
  const pending = useRunsStore((s) => s.runs[runId]?.pendingApproval);
  const { busy, run } = useAction();
  const box = useRef<HTMLDivElement>(null);
  // Each new question takes the focus once, neither answer: a stray Enter or Space must not approve.
  useEffect(() => box.current?.focus(), [pending?.requestId]);
  if (!pending) return null;
  // A failed answer is a notice: the prompt stays for another try.
  const answer = (approved: boolean) => run(() => useRunsStore.getState().approve(runId, pending.requestId, approved), (err) => {
    useAppStore.getState().notify('error', errorMessage(err));
    return true;
  });
  return (
    <div className="approval" role="alertdialog" aria-label="Approve command" tabIndex={-1} ref={box}>
      <span>The agent wants to run</span>
      <code>{pending.command}</code>
      {pending.cwd && <span className="muted">in {pending.cwd}</span>}
      <span style={{ flex: 1 }} />
      <button className="btn primary" onClick={() => void answer(true)} disabled={busy}>Approve</button>
      <button className="btn danger" onClick={() => void answer(false)} disabled={busy}>Deny</button>
    </div>
  );
}

/**
 * A follow-up turn of a finished run (docs/architecture.md §15): the same agent continues from this
 * run's result with its conversation. On a turn that already has a follow-up, the same box forks
 * the thread from here.
 */
export function ContinuePanel({ runId }: { runId: string }) {
  const fork = useRunsStore((s) => Object.values(s.runs).some((r) => r.thread?.parentRunId === runId));
  const navigate = useAppStore((s) => s.navigate);
  const [task, setTask] = useState('');
  const { busy, error, run } = useAction();
  const submit = () => run(async () => {
    const next = await useRunsStore.getState().continueRun({ runId, task });
    setTask('');
    navigate({ name: 'run', runId: next.id });
  });
  return (
    <section className="panel stack" aria-label={fork ? 'Fork from here' : 'Follow up'}>
      <label className="stack">
        <span className="muted">{fork ? 'Fork from here: another follow-up to this turn (the later turns stay as they are)' : 'Follow up: the agent continues from this result, with its conversation (nothing is applied first)'}</span>
        <textarea aria-label="Follow-up task" rows={2} value={task} placeholder="also handle the empty case" onChange={(e) => setTask(e.target.value)} />
      </label>
      <div className="row">
        <button className="btn primary" onClick={() => void submit()} disabled={busy || !task.trim()}>{fork ? 'Fork from here' : 'Follow up'}</button>
        {error && <span className="del-n" role="alert">{error}</span>}
      </div>
    </section>
  );
}

/** One run, live or from history: phase, transcript, terminal, changed files and diffs, approvals. */
export function RunView({ runId }: { runId: string }) {
  const run = useRunsStore((s) => s.runs[runId]);
  const live = useRunsStore((s) => s.live[runId]);
  const files = useDiffStore((s) => s.files[runId]);
  const navigate = useAppStore((s) => s.navigate);
  const [selected, setSelected] = useState<string>();
  const [stopping, setStopping] = useState(false);
  const [error, setError] = useState<string>();
  const final = run ? isFinalStatus(run.status) : false;
  const now = useNow(Boolean(run && !final));
  // The whole record (wipe proof, exclusions, limits) once the run has ended.
  // Read again as the run moves on: the environment that runs is known once it is prepared (the header's notice).
  const [record, setRecord] = useState<RunRecord>();
  useEffect(() => setRecord(undefined), [runId]);
  const status = run?.status;
  useEffect(() => {
    if (status && status !== 'queued') useRunsStore.getState().record(runId).then(setRecord, (err) => setError(errorMessage(err)));
  }, [runId, status]);

  useEffect(() => {
    setSelected(undefined);
    useRunsStore.getState().open(runId).catch((err) => setError(errorMessage(err)));
    useDiffStore.getState().load(runId).catch(() => {});
  }, [runId]);
  useEffect(() => {
    // Keep the file list fresh when the count moves (covers missed invalidations after a reconnect).
    if (run) void useDiffStore.getState().load(runId).catch(() => {});
  }, [runId, run?.changedFiles, run?.status]);

  if (!run) return <><ErrorBanner message={error} /><div className="empty">Loading run…</div></>;
  // The whole run, setup included, from the moment it was asked for; the agent's own share in the title.
  const end = run.endedAt ? Date.parse(run.endedAt) : now;
  const elapsed = end - Date.parse(run.createdAt);
  const agentTime = run.startedAt ? `the agent: ${formatElapsed(end - Date.parse(run.startedAt))}` : 'the agent has not started';
  const fallback = record?.id === runId ? summarizeEnvironment(record.environment).fallback : undefined;
  const changes = (
    <section className="panel" aria-label="Changes" style={{ gridColumn: '1 / -1' }}>
      <h2>Changed files {files ? <span className="muted">({files.length})</span> : null}</h2>
      <div className="files-diff">
        <FileTreeView files={files ?? []} selected={selected} onSelect={setSelected} final={final} />
        <DiffViewer runId={runId} path={selected} />
      </div>
    </section>
  );

  return (
    <>
      <div className="run-header">
        <h1 style={{ flex: '1 1 320px' }} title={run.task}>{run.task.length > 90 ? `${run.task.slice(0, 90)}…` : run.task}</h1>
        <StatusBadge status={run.status} />
        {run.pendingApproval && !final
          ? <span className="waiting-for-you" aria-label="Waiting for you">waiting for you</span>
          : run.phase && !final && <span className="muted">{run.phase}</span>}
        <span className="mono" aria-label="Elapsed" title={`the whole run (setup included); ${agentTime}`}>{formatElapsed(elapsed)}</span>
        <div className="meter" aria-label="Usage">
          <span>in <b>{formatTokens(run.usage.inputTokens)}</b></span>
          {(run.usage.cacheReadTokens > 0 || run.usage.cacheWriteTokens > 0) && (
            <span title="prompt cache: tokens read / written">cache <b>{formatTokens(run.usage.cacheReadTokens)}</b> / <b>{formatTokens(run.usage.cacheWriteTokens)}</b></span>
          )}
          <span>out <b>{formatTokens(run.usage.outputTokens)}</b></span>
          <span title={run.usage.costUsd === undefined ? costUnknownWhy(run.model) : undefined}>cost <b>{formatUsd(run.usage.costUsd)}</b>{run.usage.costUsd === undefined && run.usage.requests > 0 && <span className="muted"> (no price for {run.model})</span>}</span>
          <span>calls <b>{run.usage.requests}</b></span>
        </div>
        {!final && !stopping && <button className="btn danger" onClick={() => setStopping(true)}>Stop</button>}
        {!final && stopping && (
          <ConfirmInline
            label="Confirm stop"
            question="Stop this run? The agent is stopped, its changes so far are kept for review, and the sandbox is wiped."
            confirm="Stop run"
            cancel="Keep running"
            onConfirm={() => { setStopping(false); void useRunsStore.getState().cancel(runId); }}
            onCancel={() => setStopping(false)}
          />
        )}
        {final && run?.agent !== 'mcp' && <button className="btn" onClick={() => void runAgain(runId).catch((err) => useAppStore.getState().notify('error', errorMessage(err)))}>Run again</button>}
        {final && run.changedFiles > 0 && <button className="btn primary" onClick={() => navigate({ name: 'review', runId })}>Review &amp; apply</button>}
      </div>
      <div className="row muted" style={{ fontSize: 13 }}>
        <span className="mono">{run.id}</span>·<span>{run.agent}</span>·<span>{run.provider} / {run.model}</span>·<span>{run.isolation}</span>·
        <span className={run.network === 'none' ? '' : 'risk-reason'}>network: {run.network}</span>·<span className="mono">{run.projectDir}</span>
      </div>
      {run.thread && (
        <div className="row muted" style={{ fontSize: 13 }} aria-label="Thread">
          Turn {run.thread.turn} of a thread · continues
          <button className="btn small" onClick={() => navigate({ name: 'run', runId: run.thread!.parentRunId })}>{run.thread.parentRunId}</button>
          {run.thread.conversation === 'fresh' && <span>· a fresh conversation (another agent or wire format)</span>}
        </div>
      )}
      {(run.attempt || run.check) && (
        <div className="row muted" style={{ fontSize: 13 }} aria-label="Attempt">
          {run.attempt && <>Attempt {run.attempt.index + 1} of a group
            <button className="btn small" onClick={() => run.attempt && navigate({ name: 'compare', groupId: run.attempt.groupId })}>Compare attempts</button></>}
          {run.check && <span className={`badge ${run.check.passed ? 'ok' : 'fail'}`} title={`${run.check.command}: measured by the host after the agent's processes were gone`}>
            check {run.check.passed ? 'passed' : `failed (exit ${run.check.exitCode ?? (run.check.timedOut ? 'timeout' : 'none')})`}</span>}
        </div>
      )}
      {fallback && (
        <div className="banner warn" role="status" aria-label="Environment not used">
          This run used Airlock&apos;s own image, not the project&apos;s <span className="mono">{fallback.config}</span>: {fallback.reason}
        </div>
      )}
      {run.error && <ErrorBanner error={run.error} provider={run.provider} />}
      <ApprovalPrompt runId={runId} />
      {!final && <NetworkApprovalPrompts runId={runId} events={live?.events ?? EMPTY_EVENTS} />}
      {!final && <McpApprovalPrompts runId={runId} events={live?.events ?? EMPTY_EVENTS} />}
      {/* A finished run's result comes first; a live run's files sit under its transcript and terminal. */}
      {final && changes}
      {final && record?.id === runId && isFinalStatus(record.status) && <RunReport run={record} events={live?.events ?? []} />}
      {!final && <RunNetworkPanel runId={runId} network={run.network} {...(run.forwardPorts ? { forwardPorts: run.forwardPorts } : {})} />}
      {final && run.status !== 'interrupted' && <ContinuePanel runId={runId} />}
      <CheckpointTimeline runId={runId} final={final && run.status !== 'interrupted'} />
      <div className="run-grid">
        <section className="panel" aria-label="Agent">
          <h2>Transcript</h2>
          <TranscriptView events={live?.events ?? []} />
        </section>
        <section className="panel" aria-label="Terminal">
          <TerminalPanel runId={runId} live={!final} />
        </section>
        {!final && changes}
      </div>
    </>
  );
}
