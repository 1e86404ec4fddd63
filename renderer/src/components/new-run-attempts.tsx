import { MAX_ATTEMPTS, type ProviderInfo } from '../../../contracts';
import { AGENT_LABEL, servesAgent } from '../lib/provider-fit';
import { useNewRunForm, type AttemptDraft } from '../stores/new-run-form-store';

const ATTEMPT_AGENTS: AttemptDraft['agent'][] = ['builtin', 'claude-code', 'codex'];

/**
 * Attempts (docs/architecture.md §18): the same task run by several agents × models at once, each in
 * its own sandbox, then compared side by side (`airlock run --attempts`). A row's empty provider or
 * model is the form's own. With the check below, Compare shows whose result passes.
 */
export function AttemptsField({ providers }: { providers: ProviderInfo[] }) {
  const d = useNewRunForm((s) => s.draft);
  const set = useNewRunForm((s) => s.set);
  const rows = d.attempts;
  const update = (i: number, patch: Partial<AttemptDraft>) => set({ attempts: rows.map((r, j) => (j === i ? { ...r, ...patch } : r)) });
  const remove = (i: number) => set({ attempts: rows.filter((_, j) => j !== i) });
  const add = () => {
    // The first click makes the form's own run attempt 1, and adds a second to compare it with.
    const own: AttemptDraft = { agent: d.agent === 'custom' ? 'builtin' : d.agent, provider: d.provider, model: d.model };
    set({ attempts: rows.length ? [...rows, { ...own, model: '' }] : [own, { ...own, model: '' }] });
  };
  return (
    <div className="stack" style={{ gap: 4 }} role="group" aria-label="Attempts">
      {rows.length === 0 && <span className="muted">One run. Add attempts to run the task with several agents or models at once and compare them.</span>}
      {rows.map((r, i) => (
        <div className="row" key={i} aria-label={`Attempt ${i + 1}`} role="group">
          <span className="muted">{i + 1}.</span>
          <select aria-label={`Attempt ${i + 1} agent`} value={r.agent} onChange={(e) => update(i, { agent: ATTEMPT_AGENTS.find((a) => a === e.target.value) ?? 'builtin', provider: '' })}>
            {ATTEMPT_AGENTS.map((a) => <option key={a} value={a}>{AGENT_LABEL[a]}</option>)}
          </select>
          <select aria-label={`Attempt ${i + 1} provider`} value={r.provider} onChange={(e) => update(i, { provider: e.target.value })}>
            <option value="">the form's provider</option>
            {providers.filter((p) => servesAgent(p, r.agent)).map((p) => <option key={p.id} value={p.id}>{p.label}</option>)}
          </select>
          <input type="text" aria-label={`Attempt ${i + 1} model`} placeholder="model (default: the provider's)" value={r.model} list={`r-attempt-models-${i}`} onChange={(e) => update(i, { model: e.target.value })} />
          <datalist id={`r-attempt-models-${i}`}>{providers.find((p) => p.id === (r.provider || d.provider))?.models.map((m) => <option key={m} value={m} />)}</datalist>
          <button type="button" className="btn small" aria-label={`Remove attempt ${i + 1}`} onClick={() => remove(i)}>Remove</button>
        </div>
      ))}
      <div className="row">
        <button type="button" className="btn small" onClick={add} disabled={rows.length >= MAX_ATTEMPTS}>{rows.length ? 'Add attempt' : 'Compare attempts…'}</button>
        {rows.length >= 2 && <span className="hint">{rows.length} sandboxes; Start opens the comparison.</span>}
      </div>
    </div>
  );
}
