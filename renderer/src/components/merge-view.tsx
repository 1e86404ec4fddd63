import { useCallback, useEffect, useRef, useState } from 'react';
import type { ChangeScope, MergeRegion, MergeView } from '../../../contracts';
import { ApiError, errorMessage } from '../api';
import { useAction } from '../hooks/use-action';
import { useDiffStore } from '../stores/diff-store';
import { countOf } from '../lib/format';
import { ErrorBanner } from './common';

type Choice = 'mine' | 'theirs' | 'both';

const MARK = { start: '<<<<<<< yours', mid: '=======', end: '>>>>>>> run' };

/** The result text for these choices; an unresolved conflict is written with conflict markers. */
export function composeResolution(regions: MergeRegion[], choices: Array<Choice | undefined>): string {
  let conflict = 0;
  return regions
    .map((r) => {
      if (r.kind === 'clean') return r.text;
      const choice = choices[conflict++];
      const nl = (s: string) => (s && !s.endsWith('\n') ? `${s}\n` : s);
      if (choice === 'mine') return r.ours;
      if (choice === 'theirs') return r.theirs;
      if (choice === 'both') return `${nl(r.ours)}${r.theirs}`;
      return `${MARK.start}\n${nl(r.ours)}${MARK.mid}\n${nl(r.theirs)}${MARK.end}\n`;
    })
    .join('');
}

/** True while the text still holds a conflict block as written by `composeResolution`. */
function hasMarkers(text: string): boolean {
  return text.split('\n').some((l) => l === MARK.start || l === MARK.end);
}

/**
 * Resolve a file apply refused because the project changed it too: base, your file and the run's
 * result side by side per conflict, "Take mine / Take theirs / Both", and an editable result.
 * `scope` is the Review screen's: a turn's own change, or the whole thread's (base: where its first
 * turn started). Saving writes only if your file is still what the view was opened with (and the
 * run's side the one shown); otherwise the view says so and reloads.
 */
export function MergeViewPanel({ runId, scope, path, onClose, onResolved }: { runId: string; scope?: ChangeScope; path: string; onClose(): void; onResolved(path: string): void }) {
  const [view, setView] = useState<MergeView>();
  const [choices, setChoices] = useState<Array<Choice | undefined>>([]);
  const [text, setText] = useState('');
  const [note, setNote] = useState<string>();
  const { busy, error, setError, run } = useAction();
  const panel = useRef<HTMLElement>(null);
  // Opened below the apply result: bring it into view.
  useEffect(() => {
    // Braces: newer browsers return a promise from scrollIntoView, which React would take for a cleanup.
    panel.current?.scrollIntoView({ block: 'start' });
  }, [path]);

  const load = useCallback(async () => {
    try {
      const v = await useDiffStore.getState().mergeView({ runId, ...(scope ? { scope } : {}), path });
      setView(v);
      setChoices(Array.from({ length: v.conflicts }, () => undefined));
      setText(composeResolution(v.regions, []));
    } catch (err) {
      setError(errorMessage(err));
    }
  }, [runId, scope, path]);
  useEffect(() => {
    void load();
  }, [load]);

  const choose = (i: number, c: Choice) => {
    if (!view) return;
    const next = choices.map((x, j) => (j === i ? c : x));
    setChoices(next);
    setText(composeResolution(view.regions, next));
  };

  const save = async () => {
    if (!view) return;
    setNote(undefined);
    // The scope the host says the view is of, and its digests: the host saves only against that same view.
    await run(async () => {
      await useDiffStore.getState().resolve({ runId, scope: view.scope, path, content: text, oursSha256: view.oursSha256, theirsSha256: view.theirsSha256 });
      onResolved(path);
    }, async (err) => {
      if (!(err instanceof ApiError && err.kind === 'CONFLICT')) return false;
      // Your file changed after the view opened: show it as it is now.
      setNote(`${path} changed again in your project since this view was opened; it has been reloaded. Resolve it again.`);
      await load();
      return true;
    });
  };

  let conflictNo = 0;
  const labels = view?.scope === 'thread'
    ? { base: 'Base (when the thread started)', theirs: "The whole thread's result" }
    : { base: 'Base (when the run started)', theirs: "Run's result" };
  return (
    <section ref={panel} className="panel stack merge-view" aria-label={`Resolve ${path}`}>
      <div className="row spread">
        <h2 style={{ margin: 0 }}>Resolve <span className="mono">{path}</span></h2>
        <button className="btn small" onClick={onClose}>Close</button>
      </div>
      <ErrorBanner message={error} />
      {note && <div className="banner" role="alert">{note}</div>}
      {!view && !error && <div className="empty">Loading…</div>}
      {view && (
        <>
          {view.scope === 'thread' && <div className="muted" aria-label="Merge scope">Merging the whole thread: all its turns against the file as the first turn read it.</div>}
          <div className="muted">
            {countOf(view.conflicts, 'conflict')} where you and the run changed the same lines. The rest merges cleanly. Choose a side for each conflict, or edit the result below.
          </div>
          {view.regions.map((r, i) => {
            if (r.kind === 'clean') return null;
            const n = conflictNo++;
            return (
              <div className="merge-conflict" key={i} aria-label={`Conflict ${n + 1}`}>
                <div className="merge-sides">
                  <div><div className="merge-label">Yours (project now)</div><pre className="merge-text mine">{r.ours || '(nothing)'}</pre></div>
                  <div><div className="merge-label">{labels.base}</div><pre className="merge-text">{r.base || '(nothing)'}</pre></div>
                  <div><div className="merge-label">{labels.theirs}</div><pre className="merge-text theirs">{r.theirs || '(nothing)'}</pre></div>
                </div>
                <div className="row" role="group" aria-label={`Choose for conflict ${n + 1}`}>
                  <button className="btn small" aria-pressed={choices[n] === 'mine'} onClick={() => choose(n, 'mine')}>Take mine</button>
                  <button className="btn small" aria-pressed={choices[n] === 'theirs'} onClick={() => choose(n, 'theirs')}>Take theirs</button>
                  <button className="btn small" aria-pressed={choices[n] === 'both'} onClick={() => choose(n, 'both')}>Both</button>
                </div>
              </div>
            );
          })}
          <label className="stack">
            <span className="muted">Result (written to <span className="mono">{path}</span>; choosing a side rebuilds it)</span>
            <textarea aria-label="Merged result" className="mono merge-result" rows={Math.min(24, Math.max(6, text.split('\n').length + 1))} value={text} onChange={(e) => setText(e.target.value)} spellCheck={false} />
          </label>
          <div className="row">
            <button className="btn primary" onClick={() => void save()} disabled={busy || hasMarkers(text)}>{busy ? 'Saving…' : 'Save resolution'}</button>
            {hasMarkers(text) && <span className="muted">Choose a side for every conflict (or remove the markers) to save.</span>}
          </div>
        </>
      )}
    </section>
  );
}
