import { useEffect, useMemo, useRef } from 'react';
import type { RunEvent } from '../../../contracts';
import { buildTranscript, mcpCallText } from '../lib/transcript';

/** How a command ended: `exit 1`, `timed out`, `killed` (a non-zero exit is an answer, not a failure of the tool). */
function exitText(r: { exitCode: number | null; timedOut?: boolean }): string {
  return r.timedOut ? 'timed out' : r.exitCode === null ? 'killed' : `exit ${r.exitCode}`;
}

/** The agent's transcript: its text, tool calls with results, commands, approvals. */
export function TranscriptView({ events }: { events: readonly RunEvent[] }) {
  const items = useMemo(() => buildTranscript(events), [events]);
  const end = useRef<HTMLDivElement>(null);
  useEffect(() => {
    end.current?.scrollIntoView?.({ block: 'end' });
  }, [items.length]);
  return (
    <div className="transcript" role="log" aria-label="Transcript">
      {items.length === 0 && <div className="empty">Waiting for the agent…</div>}
      {items.map((it) => {
        switch (it.kind) {
          case 'text':
            return <div className="t-text" key={it.key}>{it.text}</div>;
          case 'tool':
            return (
              <details className="t-item" key={it.key}>
                <summary>
                  <b>{it.name}</b>{it.target && <> <span className="mono t-target">{it.target}</span></>}{' '}
                  {it.ran ? <span className={it.ran.exitCode === 0 ? 'add-n' : 'exit-n'}>{exitText(it.ran)}</span> : it.ok === false && <span className="del-n">failed</span>}
                </summary>
                <pre className="mono" style={{ whiteSpace: 'pre-wrap' }}>{it.input}</pre>
                {it.output !== undefined && <pre className="mono muted" style={{ whiteSpace: 'pre-wrap' }}>{it.output}</pre>}
              </details>
            );
          case 'command':
            return (
              <div className="t-item mono" key={it.key}>
                $ {it.command}{' '}
                {it.exitCode === undefined ? <span className="muted">running…</span> : (
                  <span className={it.exitCode === 0 ? 'add-n' : 'exit-n'}>{exitText({ exitCode: it.exitCode, ...(it.timedOut ? { timedOut: true } : {}) })}{it.durationMs !== undefined ? ` · ${(it.durationMs / 1000).toFixed(1)}s` : ''}</span>
                )}
              </div>
            );
          case 'approval':
            return <div className="t-item" key={it.key}>Approval for <code className="mono">{it.command}</code>: {it.approved === undefined ? 'waiting' : it.approved ? 'approved' : 'denied'}</div>;
          case 'mcp':
            return (
              <div className="t-item" key={it.key} data-mcp-call={`${it.server}/${it.tool}`}>
                MCP <b className="mono">{it.server}</b> › <span className="mono">{it.tool}</span>{' '}
                <span className={it.decision === 'deny' || it.isError ? 'del-n' : 'add-n'}>{mcpCallText(it)}</span>
              </div>
            );
          case 'status':
            return <div className="t-status" key={it.key}>→ {it.status}{it.phase ? ` · ${it.phase}` : ''}{it.error ? ` · ${it.error}` : ''}</div>;
          case 'error':
            return <div className="t-error" key={it.key}>{it.message}</div>;
          case 'finished':
            return <div className="t-item" key={it.key}><b>Finished.</b> <span className="t-text">{it.summary}</span></div>;
        }
      })}
      <div ref={end} />
    </div>
  );
}
