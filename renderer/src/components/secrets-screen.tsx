import { useEffect, useState, type FormEvent } from 'react';
import type { SecretView } from '../../../contracts';
import { errorMessage } from '../api';
import { useAction } from '../hooks/use-action';
import { useAppStore } from '../stores/app-store';
import { useRecordsStore } from '../stores/records-store';
import { ConfirmInline, ErrorBanner } from './common';

type Kind = 'github' | 'npm' | 'custom';

const KINDS: Array<{ value: Kind; label: string; hint: string }> = [
  { value: 'github', label: 'GitHub', hint: 'github.com, api.github.com and *.githubusercontent.com; Bearer for the API, Basic for git over HTTPS; GH_TOKEN in the sandbox' },
  { value: 'npm', label: 'npm-style registry', hint: "Bearer toward the registry's host; NPM_TOKEN and npm's config in the sandbox" },
  { value: 'custom', label: 'Other', hint: 'your hosts, and how the secret travels: bearer, basic:USER or header:NAME' },
];

const words = (text: string) => text.split(/[\s,]+/).map((w) => w.trim()).filter(Boolean);

/**
 * Egress secrets (docs/architecture.md §2.8): each bound to hosts and an injection form, its value in
 * the OS keychain. The sandbox only ever sees a placeholder; this screen never shows a value.
 */
export function SecretsScreen() {
  const [list, setList] = useState<SecretView[]>();
  const [error, setError] = useState<string>();
  const [removing, setRemoving] = useState<string>();
  const [kind, setKind] = useState<Kind>('github');
  const [name, setName] = useState('');
  const [hosts, setHosts] = useState('');
  const [forms, setForms] = useState('bearer');
  const [value, setValue] = useState('');
  const { busy, error: formError, run } = useAction();

  const { listSecrets, setSecret, removeSecret } = useRecordsStore.getState();
  const load = () => listSecrets().then((l) => { setList(l); setError(undefined); }, (err) => setError(errorMessage(err)));
  useEffect(() => void load(), []);

  const submit = (e: FormEvent) => {
    e.preventDefault();
    void run(async () => {
      const saved = await setSecret({
        name: name.trim(),
        ...(kind === 'custom' ? {} : { preset: kind }),
        hosts: words(hosts),
        forms: kind === 'custom' ? words(forms) : [],
        value,
      });
      // The value leaves the page as soon as it is stored.
      setValue('');
      setName('');
      setHosts('');
      useAppStore.getState().notify('success', `Secret "${saved.name}" stored in the keychain`);
      await load();
    });
  };
  const remove = async (secret: string) => {
    setRemoving(undefined);
    try {
      await removeSecret(secret);
      await load();
    } catch (err) {
      setError(errorMessage(err));
    }
  };

  return (
    <>
      <h1>Secrets</h1>
      <p className="muted">
        Tokens the egress gateway puts on requests on the way out, only toward their hosts. A run uses only the secrets chosen for it; the sandbox sees a placeholder, never the value.
      </p>
      <ErrorBanner message={error} />
      <section className="panel" aria-label="Stored secrets">
        {list === undefined ? (
          <div className="muted">Loading…</div>
        ) : list.length === 0 ? (
          <div className="muted">No secrets yet. Add one below (or with <code>airlock secrets set NAME --preset github</code>; a token a host command prints when needed: <code>--command 'gh auth token'</code>).</div>
        ) : (
          <table>
            <thead><tr><th>Name</th><th>Hosts</th><th>Travels as</th><th>In the sandbox</th><th /></tr></thead>
            <tbody>
              {list.map((s) => (
                <tr key={s.name} data-secret={s.name}>
                  <td className="mono">{s.name}{s.preset ? <span className="muted"> ({s.preset})</span> : null}{!s.hasValue && <span className="del-n"> no value in the keychain</span>}{s.command ? <div className="muted" data-command>fetched by <code>{s.command}</code> when a run needs it{s.ttlSeconds ? `, held ${s.ttlSeconds} s` : ''}</div> : null}</td>
                  <td className="mono">{s.hosts.join(', ')}{s.pathPrefixes?.length ? ` under ${s.pathPrefixes.join(', ')}` : ''}</td>
                  <td className="mono">{s.forms.join(', ')}</td>
                  <td className="mono">{[...s.env, ...(s.git ? ['git credential helper'] : []), ...(s.npm ? ['npm config'] : [])].join(', ') || '—'}</td>
                  <td>
                    {removing === s.name ? (
                      <ConfirmInline
                        label={`Confirm remove secret ${s.name}`}
                        question={`Remove "${s.name}"? Its value is deleted from the keychain; runs that name it will not start.`}
                        confirm="Remove"
                        cancel="Keep"
                        onConfirm={() => void remove(s.name)}
                        onCancel={() => setRemoving(undefined)}
                      />
                    ) : (
                      <button className="btn small danger" onClick={() => setRemoving(s.name)} aria-label={`Remove secret ${s.name}`}>Remove</button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </section>
      <section className="panel stack" aria-label="Add a secret">
        <h2>Add a secret</h2>
        <form className="stack" onSubmit={(e) => void submit(e)} aria-label="Add secret">
          <div className="row" role="radiogroup" aria-label="Kind">
            {KINDS.map((k) => (
              <label key={k.value} className="row" style={{ gap: 4 }}>
                <input type="radio" name="secret-kind" value={k.value} checked={kind === k.value} onChange={() => setKind(k.value)} />
                {k.label}
              </label>
            ))}
          </div>
          <span className="muted" style={{ fontSize: 13 }}>{KINDS.find((k) => k.value === kind)?.hint}</span>
          <label className="row">Name <input aria-label="Secret name" value={name} onChange={(e) => setName(e.target.value)} placeholder={kind === 'npm' ? 'registry' : 'gh'} spellCheck={false} autoCapitalize="off" maxLength={40} /></label>
          {kind !== 'github' && (
            <label className="row">{kind === 'npm' ? 'Registry host' : 'Hosts'} <input aria-label="Secret hosts" value={hosts} onChange={(e) => setHosts(e.target.value)} placeholder={kind === 'npm' ? 'npm.example.com' : 'api.example.com, *.example.com'} spellCheck={false} autoCapitalize="off" /></label>
          )}
          {kind === 'custom' && (
            <label className="row">Travels as <input aria-label="Secret forms" value={forms} onChange={(e) => setForms(e.target.value)} placeholder="bearer" spellCheck={false} autoCapitalize="off" /></label>
          )}
          <label className="row">Value <input aria-label="Secret value" type="password" autoComplete="off" value={value} onChange={(e) => setValue(e.target.value)} /></label>
          <div className="row">
            <button className="btn primary" type="submit" disabled={busy || !name.trim() || value.length === 0}>{busy ? 'Storing…' : 'Store in keychain'}</button>
            {formError && <span className="del-n" role="alert">{formError}</span>}
          </div>
        </form>
      </section>
    </>
  );
}
