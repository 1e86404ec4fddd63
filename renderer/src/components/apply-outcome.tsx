import type { ApplyResult } from '../../../contracts';
import { countOf } from '../lib/format';

/** The apply outcome as the review screen shows it: whole or nothing, conflicts to resolve, nothing left to apply. */
export function ApplyOutcome({ result, resolved, busy, onResolve, onApplyOthers }: {
  result: ApplyResult;
  /** Conflicted files the user has resolved in the merge view since this apply. */
  resolved: ReadonlySet<string>;
  busy: boolean;
  onResolve(path: string): void;
  /** Apply again with the conflicting files left out (the explicit, partial apply). */
  onApplyOthers(): void;
}) {
  const { applied, conflicts, held, unchanged } = result;
  const refusedWhole = conflicts.length > 0 && applied.length === 0;
  const open = conflicts.filter((c) => !resolved.has(c.path));
  const names = (paths: string[]) => paths.map((p, i) => <span key={p}>{i ? ', ' : ''}<span className="mono">{p}</span></span>);
  return (
    <div className="stack" role="status" aria-label="Apply result">
      {applied.length > 0 && (
        <div className="add-n">Applied {countOf(applied.length, 'file')}{result.branch ? ` on branch ${result.branch}` : ''}{result.commit ? ` (${result.commit.slice(0, 10)})` : ''}{result.author ? ` as ${result.author}` : ''}.</div>
      )}
      {applied.length === 0 && conflicts.length === 0 && (
        <div className="muted">Nothing to apply: your project already has {unchanged.length === 1 ? 'this change' : `these ${countOf(unchanged.length, 'file')}`}.</div>
      )}
      {applied.length > 0 && unchanged.length > 0 && <div className="muted">Already in your project: {names(unchanged)}.</div>}
      {result.authorFallback && <div className="banner" role="note">git has no user.name/user.email for this project, so the commit is authored by Airlock. Set them with <span className="mono">git config user.name</span> / <span className="mono">user.email</span> to author it yourself.</div>}
      {conflicts.length > 0 && (
        <div className={`banner ${open.length ? 'error' : 'ok'}`} aria-label="Conflicts">
          {refusedWhole
            ? <><b>Nothing was written.</b> {countOf(conflicts.length, 'file')} of this change {conflicts.length === 1 ? 'conflicts' : 'conflict'} with edits in your project, and a change is applied whole or not at all, so your project stays as it was{result.branch ? '' : '. Resolve each conflict, then apply again'}.</>
            : <><b>{countOf(conflicts.length, 'file')} not applied</b> because your project changed under them. Nothing of yours was overwritten; your project now has only part of this change.</>}
          <ul>
            {conflicts.map((c) => (
              <li key={c.path}>
                <span className="mono">{c.path}</span> — {c.reason}{' '}
                {resolved.has(c.path)
                  ? <span className="add-n" aria-label={`${c.path} resolved`}>✓ resolved</span>
                  : !result.branch && <button className="btn small" onClick={() => onResolve(c.path)}>Resolve</button>}
              </li>
            ))}
          </ul>
          {open.length === 0 && <div aria-label="All resolved"><b>All conflicts resolved.</b> {held.length ? `Apply again to write the other ${countOf(held.length, 'file')}.` : 'Apply again to check the rest.'}</div>}
          {refusedWhole && open.length > 0 && held.length > 0 && (
            <div className="stack" style={{ marginTop: 6 }}>
              <div className="muted" aria-label="What a partial apply leaves">
                Applying only the {countOf(held.length, 'file')} that {held.length === 1 ? "doesn't" : "don't"} conflict ({names(held)}) leaves {names(open.map((c) => c.path))} as {open.length === 1 ? 'it is' : 'they are'} in your project, without the run's changes: code that relies on them may not build or pass its tests until you resolve {open.length === 1 ? 'it' : 'them'}.
              </div>
              <div><button className="btn small" disabled={busy} onClick={onApplyOthers}>Apply the {countOf(held.length, 'file')} that {held.length === 1 ? "doesn't" : "don't"} conflict</button></div>
            </div>
          )}
        </div>
      )}
    </div>
  );
}
