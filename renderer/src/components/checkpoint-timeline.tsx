import { useState } from 'react';
import { useAction } from '../hooks/use-action';
import { useRemote } from '../hooks/use-remote';
import { useAppStore } from '../stores/app-store';
import { useDiffStore } from '../stores/diff-store';
import { useRunsStore } from '../stores/runs-store';

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

/**
 * A run's checkpoints as a timeline (docs/architecture.md §19): one per agent turn that changed
 * files, the last being the result. Each opens in Review ("up to here"); once the run has ended,
 * each can be continued from. Refetched whenever the run's changed files change.
 */
export function CheckpointTimeline({ runId, final }: { runId: string; final: boolean }) {
  const files = useDiffStore((s) => s.files[runId]);
  const navigate = useAppStore((s) => s.navigate);
  const checkpoints = useDiffStore((s) => s.checkpoints);
  const { value: list, error: loadError } = useRemote(() => checkpoints(runId), [runId, files, final]);
  const [continuing, setContinuing] = useState<number>();
  const [task, setTask] = useState('');
  // Loading the list and continuing share one error line.
  const { busy, error: runError, run } = useAction();
  const error = runError ?? loadError?.message;
  if (!list?.checkpoints.length) return error ? <div className="del-n" role="alert">{error}</div> : null;
  const submit = (n: number) => run(async () => {
    const next = await useRunsStore.getState().continueRun({ runId, task, checkpoint: n });
    setTask('');
    setContinuing(undefined);
    navigate({ name: 'run', runId: next.id });
  });
  return (
    <section className="panel stack" aria-label="Checkpoints">
      <h2>Checkpoints <span className="muted">({list.checkpoints.length}; the run's change after each turn that changed files)</span></h2>
      <ol className="stack" style={{ margin: 0, padding: 0, listStyle: 'none' }}>
        {list.checkpoints.map((c) => (
          <li key={c.n} aria-label={`Checkpoint ${c.n}`}>
            <div className="row">
              <b>#{c.n}</b>
              <span className="muted">{c.final ? 'the result' : `after turn ${(c.request ?? 1) - 1}`}</span>
              <span>{plural(c.files, 'file')}</span>
              <span className="add-n">+{c.additions}</span>
              <span className="del-n">−{c.deletions}</span>
              <button className="btn small" onClick={() => navigate({ name: 'review', runId, checkpoint: c.n })}>Review up to here</button>
              {final && <button className="btn small" onClick={() => setContinuing(continuing === c.n ? undefined : c.n)}>Follow up from here</button>}
            </div>
            {continuing === c.n && (
              <div className="row">
                <textarea aria-label={`Follow-up task from checkpoint ${c.n}`} rows={2} value={task} placeholder="take another direction from here" onChange={(e) => setTask(e.target.value)} />
                <button className="btn primary" disabled={busy || !task.trim()} onClick={() => void submit(c.n)}>Follow up from checkpoint {c.n}</button>
                <span className="muted">{c.conversation ? 'with the conversation up to this turn' : 'a fresh conversation (only the built-in agent keeps one per checkpoint)'}</span>
              </div>
            )}
          </li>
        ))}
      </ol>
      {list.limited && <div className="muted">Later turns have no checkpoint of their own (the {list.limited.reason} bound was reached); the result is whole.</div>}
      {error && <div className="del-n" role="alert">{error}</div>}
    </section>
  );
}
