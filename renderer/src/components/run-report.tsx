import type { RunEvent, RunRecord } from '../../../contracts';
import { auditHighlights } from '../lib/audit-summary';
import { summarizeEnvironment } from '../lib/environment-summary';
import { formatElapsed, formatTime } from '../lib/format';
import { mcpCallText } from '../lib/transcript';
import { useAppStore } from '../stores/app-store';
import { AuditVerdict, useAuditLog } from './audit-view';

/**
 * The wipe, named by the run id the user saw. A sandbox taken from the warm pool keeps the names it
 * was started under (`airlock-w-…`): the proof says which of the removed names was this run's.
 */
function WipeProof({ runId, wipe }: { runId: string; wipe: RunRecord['wipe'] }) {
  if (!wipe) return <div className="muted">No wipe was recorded (the run did not get that far, or it was interrupted; the sandbox is reaped at the next start).</div>;
  return (
    <>
      <div className={wipe.verified ? 'add-n' : 'del-n'}>
        {wipe.verified
          ? <>✓ Verified gone: the sandbox of run <span className="mono nowrap">{runId}</span> and everything it used</>
          : <>✗ Left behind from the sandbox of run <span className="mono nowrap">{runId}</span>: {wipe.leftovers.join(', ')}</>}
      </div>
      {wipe.pooledAs && (
        <div className="muted" style={{ fontSize: 12 }}>
          This run took a sandbox started ahead of time (warm pool) as <span className="mono">{wipe.pooledAs}</span>; the engine kept that name, so the removed names below carry it.
        </div>
      )}
      {wipe.removed.length > 0 && (
        <ul aria-label="Removed">
          {wipe.removed.map((r) => (
            <li key={r}><span className="mono">{r}</span>{wipe.pooledAs && r.includes(wipe.pooledAs) ? <span className="muted"> — run {runId}'s sandbox</span> : null}</li>
          ))}
        </ul>
      )}
      <div className="muted" style={{ fontSize: 12 }}>{formatTime(wipe.at)}{wipe.durationMs !== undefined ? ` · took ${wipe.durationMs < 1000 ? `${Math.round(wipe.durationMs)} ms` : `${(wipe.durationMs / 1000).toFixed(1)} s`}` : ''}</div>
    </>
  );
}

/** Which environment ran and where from, a devcontainer found and not used, and the time before the agent started. */
function EnvironmentReport({ run }: { run: RunRecord }) {
  const env = summarizeEnvironment(run.environment);
  const end = run.endedAt ? Date.parse(run.endedAt) : undefined;
  const agentFrom = run.startedAt ? Date.parse(run.startedAt) : undefined;
  return (
    <section aria-label="Environment">
      <h3>Environment</h3>
      <div>{env.title}</div>
      {env.fallback && <div className="risk-reason" role="note" data-testid="environment-fallback">Not the project&apos;s <span className="mono">{env.fallback.config}</span>: {env.fallback.reason}</div>}
      {env.prepared && <div className="muted">{env.prepared}</div>}
      {run.environment && run.environment.notApplied.length > 0 && !env.fallback && (
        <div className="muted">Not applied: {run.environment.notApplied.map((n) => n.field).join(', ')}</div>
      )}
      <div className="muted">
        {agentFrom !== undefined ? `Before the agent (sandbox, copy-in, setup): ${formatElapsed(agentFrom - Date.parse(run.createdAt))}` : 'The agent never started.'}
        {agentFrom !== undefined && end !== undefined ? ` · the agent: ${formatElapsed(end - agentFrom)}` : ''}
      </div>
    </section>
  );
}

/** The calls through the run's MCP gateway: server, tool, decision, by whom, how long, an error (the host's `mcp_call` events). */
function McpCallsReport({ run, events }: { run: RunRecord; events: readonly RunEvent[] }) {
  const calls = events.flatMap((e) => (e.event.type === 'mcp_call' ? [{ at: e.at, seq: e.seq, call: e.event }] : []));
  return (
    <section aria-label="MCP tool calls">
      <h3>MCP tool calls</h3>
      {run.mcpServers?.length ? <div>Servers <span className="mono">{run.mcpServers.join(', ')}</span></div> : null}
      {calls.length === 0 ? <div className="muted">No tool was called.</div> : (
        <ul aria-label="MCP calls">
          {calls.map(({ at, seq, call }) => (
            <li key={seq} data-mcp-call={`${call.server}/${call.tool}`}>
              <span className="mono">{call.server} › {call.tool}</span>{' '}
              <span className={call.decision === 'deny' || call.isError ? 'del-n' : 'add-n'}>{mcpCallText(call)}</span>{' '}
              <span className="muted">{formatTime(at)}</span>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

/**
 * What a finished run leaves as proof: the audit log's verdict, the wipe, the files kept out of
 * the sandbox, the approvals asked and answered, and the network attempts. Approvals and network
 * come from the audit log (the host's own record); wipe and exclusions from the run record.
 */
export function RunReport({ run, events }: { run: RunRecord; events: readonly RunEvent[] }) {
  const navigate = useAppStore((s) => s.navigate);
  const { verify, records, error } = useAuditLog(run.id, run.applied?.at);
  const h = auditHighlights(records ?? [], events);
  const loading = !records && !error;
  return (
    <section className="panel stack" aria-label="Run report">
      <AuditVerdict verify={verify} error={error}>
        <span style={{ flex: 1 }} />
        <button className="btn" onClick={() => navigate({ name: 'audit', runId: run.id })}>Open audit log</button>
      </AuditVerdict>
      <div className="report-grid">
        <EnvironmentReport run={run} />
        <section aria-label="Sandbox wipe">
          <h3>Sandbox wipe</h3>
          <WipeProof runId={run.id} wipe={run.wipe} />
        </section>
        <section aria-label="Kept out of the sandbox">
          <h3>Kept out of the sandbox</h3>
          {run.excludedFiles.length === 0 ? <div className="muted">Nothing: no credential-looking files in the project.</div> : (
            <ul>{run.excludedFiles.map((f) => <li key={f.path}><span className="mono">{f.path}</span> <span className="muted">— {f.reason}</span></li>)}</ul>
          )}
        </section>
        <section aria-label="Approvals">
          <h3>Approvals</h3>
          {run.approval === 'auto' && h.approvals.length === 0 && <div className="muted">Not asked: commands ran freely inside the sandbox.</div>}
          {run.approval === 'ask' && h.approvals.length === 0 && !loading && <div className="muted">No command was asked about.</div>}
          {h.approvals.length > 0 && (
            <ul>
              {h.approvals.map((a, i) => (
                <li key={i}><span className={a.approved ? 'add-n' : 'del-n'}>{a.approved ? 'approved' : 'denied'}</span> <code>{a.command}</code> <span className="muted">{formatTime(a.at)}</span></li>
              ))}
            </ul>
          )}
        </section>
        {(run.mcpServers?.length || events.some((e) => e.event.type === 'mcp_call')) && <McpCallsReport run={run} events={events} />}
        <section aria-label="Network">
          <h3>Network</h3>
          <div>
            Policy <b>{run.network}</b>
            {h.policy?.allow.length ? <span className="muted"> — allowed: <span className="mono">{h.policy.allow.join(', ')}</span></span> : null}
          </div>
          {h.attempts.length === 0 && !loading && <div className="muted">{run.network === 'none' ? 'No network: the sandbox reached only the model, through Airlock.' : 'No connections through the egress proxy were recorded.'}</div>}
          {h.attempts.length > 0 && (
            <ul aria-label="Network attempts">
              {h.attempts.map((a, i) => (
                <li key={i}>
                  <span className={a.allowed ? 'add-n' : 'del-n'}>{a.allowed ? 'allowed' : 'blocked'}</span> <span className="mono">{a.host}{a.port ? `:${a.port}` : ''}</span>
                  {a.reason && <span className="muted"> — {a.reason}</span>}
                </li>
              ))}
            </ul>
          )}
        </section>
      </div>
    </section>
  );
}
