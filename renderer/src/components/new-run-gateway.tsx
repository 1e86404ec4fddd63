import { useEffect, useState } from 'react';
import type { SecretView } from '../../../contracts';
import { errorMessage } from '../api';
import { useRecordsStore } from '../stores/records-store';
import { useAppStore } from '../stores/app-store';
import { useNewRunForm } from '../stores/new-run-form-store';

/**
 * The egress gateway of an allow-list run (docs/architecture.md §2.8), as `airlock run` takes it:
 * the stored secrets the run may use (values stay in the keychain; the sandbox sees placeholders),
 * rules one per line (`--rule`), and what a request a rule refuses does (`--network-approvals`).
 */
export function GatewayFields() {
  const d = useNewRunForm((s) => s.draft);
  const set = useNewRunForm((s) => s.set);
  const navigate = useAppStore((s) => s.navigate);
  const [secrets, setSecrets] = useState<SecretView[]>();
  const [error, setError] = useState<string>();
  useEffect(() => {
    useRecordsStore.getState().listSecrets().then(setSecrets, (err: unknown) => setError(errorMessage(err)));
  }, []);
  const toggle = (name: string, on: boolean) => set({ secrets: on ? [...new Set([...d.secrets, name])] : d.secrets.filter((n) => n !== name) });
  // A name ticked earlier (Run again) whose secret is gone is shown, so Start's refusal is no surprise.
  const missing = d.secrets.filter((n) => secrets && !secrets.some((s) => s.name === n));

  return (
    <fieldset className="stack gateway-fields" aria-label="Gateway" style={{ gap: 6 }}>
      <legend className="muted">Gateway: secrets and rules for the allowed hosts</legend>
      <div className="row" role="group" aria-label="Secrets for this run">
        <span className="muted">Secrets:</span>
        {error && <span className="del-n">{error}</span>}
        {secrets?.length === 0 && <span className="muted">none stored.</span>}
        {secrets?.map((s) => (
          <label key={s.name} className="row" title={`${s.hosts.join(', ')}${s.command ? ` (fetched by: ${s.command})` : s.hasValue ? '' : ' (no value stored)'}`}>
            <input type="checkbox" checked={d.secrets.includes(s.name)} disabled={!s.hasValue} onChange={(e) => toggle(s.name, e.target.checked)} /> {s.name}
            <span className="muted">({s.hosts.slice(0, 2).join(', ')}{s.hosts.length > 2 ? '…' : ''})</span>
          </label>
        ))}
        {missing.map((n) => <span key={n} className="badge warn" title="No secret of this name is stored">{n}: not stored</span>)}
        <button type="button" className="btn small" onClick={() => navigate({ name: 'secrets' })}>Manage secrets</button>
      </div>
      <label htmlFor="r-rules" className="muted">Rules, one per line (first match wins):</label>
      <textarea id="r-rules" rows={3} spellCheck={false} className="mono" value={d.egressRules} onChange={(e) => set({ egressRules: e.target.value })}
        placeholder={'github.com git-push=agent/\napi.github.com read-only\napi.example.com allow GET,POST /v1/**'} aria-describedby="r-rules-help" />
      <div id="r-rules-help" className="hint">
        <span className="mono">HOST read-only</span> (GET, HEAD, git fetch) · <span className="mono">HOST git-fetch</span> · <span className="mono">HOST git-push=PREFIX</span> (push only
        branches under PREFIX) · <span className="mono">HOST allow|deny [METHODS] [/path/glob]</span>. Rules narrow the allowed domains above; they never add one.
      </div>
      <div className="row" role="radiogroup" aria-label="A request a rule refuses, or an MCP tool that asks">
        <span className="muted">A request a rule refuses, or an MCP tool call that asks:</span>
        <label className="row"><input type="radio" name="net-approvals" checked={d.networkApprovals === 'ask'} onChange={() => set({ networkApprovals: 'ask' })} /> waits for my answer</label>
        <label className="row"><input type="radio" name="net-approvals" checked={d.networkApprovals === 'deny'} onChange={() => set({ networkApprovals: 'deny' })} /> is refused at once (unattended runs)</label>
      </div>
    </fieldset>
  );
}
