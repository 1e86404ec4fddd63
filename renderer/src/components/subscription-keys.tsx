import { useState, type FormEvent } from 'react';
import type { KeyInfo, KeyTestResult, ProviderInfo } from '../../../contracts';
import { errorMessage } from '../api';
import { useAppStore } from '../stores/app-store';
import { useKeysStore } from '../stores/keys-store';
import { useAction } from '../hooks/use-action';

const CLIENT: Record<NonNullable<KeyInfo['credential']>, { client: string; how: string }> = {
  'claude-subscription': { client: 'Claude Code', how: 'Run `claude setup-token` on this machine and paste the token it prints.' },
  'chatgpt-signin': { client: 'Codex CLI', how: 'Sign in with `codex login` (ChatGPT) on this machine, then import it — or paste the content of ~/.codex/auth.json.' },
};

/** A test result in plain words (the message says what to do). */
const TEST_WORDS: Record<KeyTestResult['status'], string> = {
  ok: 'Valid',
  'bad-key': 'Refused',
  unreachable: 'Could not reach',
  'rate-limited': 'Valid, rate-limited',
  error: 'Could not check',
};

function SubscriptionRow({ provider, storage }: { provider: ProviderInfo; storage: 'keychain' | 'session' }) {
  const kind = provider.credential!.kind;
  const info = useKeysStore((s) => s.keys.find((k) => k.provider === provider.id));
  const test = useKeysStore((s) => s.tests[provider.id]);
  const { setSubscription, importCodex, removeKey, testKey } = useKeysStore.getState();
  const notify = useAppStore((s) => s.notify);
  const [editing, setEditing] = useState(false);
  const [draft, setDraft] = useState('');
  const { busy, run } = useAction();
  const { client, how } = CLIENT[kind];

  const act = (what: () => Promise<unknown>, done: string) => run(async () => {
    await what();
    setEditing(false);
    notify('success', done);
  }, (err) => {
    notify('error', errorMessage(err));
    return true;
  });
  const save = (e: FormEvent) => {
    e.preventDefault();
    const secret = draft;
    setDraft(''); // the credential leaves the UI now: it is never shown or kept again
    void act(() => setSubscription({ kind, secret, storage }), `Saved the ${provider.label}`);
  };

  return (
    <tr data-provider={provider.id}>
      <td><b>{provider.label}</b><div className="muted mono">{provider.id}</div></td>
      <td>
        {info?.hasKey ? <span>signed in{info.last4 ? <span className="mono"> ••••{info.last4}</span> : null}</span> : <span className="muted">not set</span>}
        {info?.expiresAt && <div className="muted">token valid until {new Date(info.expiresAt).toLocaleString()} (refreshed by Airlock)</div>}
        {info?.storage === 'session' && <span className="badge warn" style={{ marginLeft: 6 }}>this session only</span>}
        {test && (
          <div className={test.status === 'ok' ? 'add-n' : test.status === 'testing' ? 'muted' : 'del-n'} role="status" data-test-result={test.status}>
            {test.status === 'testing' ? 'testing…' : `${TEST_WORDS[test.status]}: ${test.message}`}
            {test.status === 'bad-key' && !editing && <button className="btn small" style={{ marginLeft: 6 }} onClick={() => setEditing(true)}>Replace</button>}
          </div>
        )}
        <div className="muted" data-note="serves-only">Serves only {client} (agent <span className="mono">{provider.credential!.agent}</span>).</div>
      </td>
      <td>
        {editing ? (
          <form className="stack" onSubmit={save}>
            <span className="muted">{how}</span>
            {kind === 'claude-subscription' ? (
              <input type="password" autoComplete="off" spellCheck={false} aria-label={`${provider.label} setup token`} placeholder="sk-ant-oat01-…" value={draft} onChange={(e) => setDraft(e.target.value)} autoFocus />
            ) : (
              <textarea aria-label="Codex auth.json" spellCheck={false} autoComplete="off" rows={4} placeholder='{"tokens": {…}}' value={draft} onChange={(e) => setDraft(e.target.value)} autoFocus style={{ WebkitTextSecurity: 'disc' } as React.CSSProperties} />
            )}
            <div className="row">
              <button className="btn primary" disabled={busy || draft.trim().length === 0}>Save</button>
              <button type="button" className="btn" onClick={() => { setDraft(''); setEditing(false); }}>Cancel</button>
            </div>
          </form>
        ) : (
          <div className="row">
            {kind === 'chatgpt-signin' && (
              <button className="btn" disabled={busy} onClick={() => void act(() => importCodex({ storage }), 'Imported the ChatGPT sign-in from this machine')}>Import from Codex</button>
            )}
            <button className="btn" onClick={() => setEditing(true)}>{kind === 'claude-subscription' ? 'Paste setup token' : 'Paste auth.json'}</button>
            {info?.hasKey && <button className="btn" disabled={test?.status === 'testing'} onClick={() => void testKey(provider.id)}>Test</button>}
            {info?.hasKey && <button className="btn danger" onClick={() => void removeKey(provider.id)}>Remove</button>}
          </div>
        )}
      </td>
    </tr>
  );
}

/**
 * Subscription sign-in (docs/architecture.md §6): a Claude Pro/Max setup token or a ChatGPT sign-in,
 * used instead of an API key by their vendor's own CLI only. The login itself never enters a sandbox.
 */
export function SubscriptionKeys({ providers, storage }: { providers: ProviderInfo[]; storage: 'keychain' | 'session' }) {
  if (providers.length === 0) return null;
  return (
    <section className="panel stack" aria-label="Subscription sign-in">
      <h2>Subscription sign-in</h2>
      <p className="muted" style={{ margin: 0 }}>
        Use a Claude Pro/Max subscription or a ChatGPT sign-in instead of an API key. Each serves only Claude Code / Codex CLI: the built-in agent and custom commands cannot use it. The sandbox gets a one-time token in its place; the sign-in stays in your keychain and Airlock refreshes it.
      </p>
      <table>
        <thead><tr><th>Sign-in</th><th>Status</th><th /></tr></thead>
        <tbody>{providers.map((p) => <SubscriptionRow key={p.id} provider={p} storage={storage} />)}</tbody>
      </table>
    </section>
  );
}
