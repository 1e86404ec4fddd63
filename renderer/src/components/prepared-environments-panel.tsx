import { useEffect, useState } from 'react';
import type { ErrorInfo } from '../../../contracts';
import type { ProjectBaseInfo } from '../../../contracts/environments';
import { formatBytes } from '../../../contracts/format';
import { errorInfo } from '../api';
import { useAction } from '../hooks/use-action';
import { useRecordsStore } from '../stores/records-store';
import { ConfirmInline, ErrorBanner } from './common';

/**
 * Settings → Prepared environments (docs/architecture.md §16): how many the engine keeps for this
 * installation and their size, the project bases kept beside them (§11, "A project's last copy"),
 * and a button that removes them all (`airlock env prune`).
 */
export function PreparedEnvironmentsPanel() {
  const [state, setState] = useState<{ count: number; bytes: number; bases: ProjectBaseInfo[] }>();
  const [loadError, setLoadError] = useState<ErrorInfo>();
  const { busy, failure, run } = useAction();
  const error = failure ?? loadError;
  const [cleared, setCleared] = useState<string>();
  const [confirming, setConfirming] = useState(false);
  const load = () =>
    useRecordsStore.getState().listEnvironments().then(
      (r) => { setState({ count: r.environments.length, bytes: r.totalBytes, bases: r.bases }); setLoadError(undefined); },
      (err) => setLoadError(errorInfo(err)),
    );
  useEffect(() => { void load(); }, []);
  const clear = () => run(async () => {
    const r = await useRecordsStore.getState().pruneEnvironments();
    setCleared(`Removed ${r.removed.length}, ${formatBytes(r.freedBytes)} freed${r.kept.length ? `; ${r.kept.length} in use kept` : ''}.`);
    await load();
  });
  return (
    <section className="panel" aria-labelledby="s-prepared-title">
      <h2 id="s-prepared-title">Prepared environments</h2>
      <p className="muted">What a devcontainer&apos;s setup commands left, kept as an image on the container engine so the next run on the same inputs skips setup. Nothing of any agent, no run token and no key is in them.</p>
      <div className="row">
        {/* An image's size here is what setup added to the image it ran in (the shared layers below are not its own). */}
        <span data-testid="prepared-size" title="what setup added on top of each environment's image">{state ? `${state.count} kept, ${formatBytes(state.bytes)} added by setup` : error ? 'unknown' : 'Reading…'}</span>
        {!confirming && <button type="button" className="btn small" disabled={busy || (!state?.count && !state?.bases.length)} onClick={() => setConfirming(true)}>{busy ? 'Clearing…' : 'Clear'}</button>}
        {cleared && <span className="muted" role="status">{cleared}</span>}
      </div>
      {!!state?.bases.length && (
        <div data-testid="project-bases">
          <h3>Project bases</h3>
          <p className="muted">Each project as Airlock last copied it in (read from the project folder, never from a run), kept on the engine so the next run copies in only what changed.</p>
          <ul>
            {state.bases.map((b) => (
              <li key={b.volume}>
                <code>{b.project}</code> <span className="muted">{b.files.toLocaleString()} files, {formatBytes(b.sizeBytes)}, written {new Date(b.createdAt).toLocaleString()}{b.projectExists ? '' : ' — the folder is gone'}</span>
              </li>
            ))}
          </ul>
        </div>
      )}
      {confirming && (
        <ConfirmInline
          label="Confirm clearing prepared environments"
          question={`Remove ${state?.count ?? 0} prepared environment(s)${state?.bases.length ? ` and ${state.bases.length} project base(s)` : ''}? The next run on each project runs its setup again${state?.bases.length ? ' and copies the project in whole' : ''}.`}
          confirm="Clear"
          cancel="Keep them"
          onConfirm={() => { setConfirming(false); void clear(); }}
          onCancel={() => setConfirming(false)}
        />
      )}
      <ErrorBanner error={error} />
    </section>
  );
}
