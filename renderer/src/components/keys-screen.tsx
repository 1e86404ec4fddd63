import { useEffect, useState, type FormEvent } from 'react';
import type { ProviderInfo } from '../../../contracts';
import { errorMessage } from '../api';
import { useAppStore } from '../stores/app-store';
import { useKeysStore } from '../stores/keys-store';
import { ErrorBanner } from './common';
import { SubscriptionKeys } from './subscription-keys';

function KeyRow({ provider, sessionOnly }: { provider: ProviderInfo; sessionOnly: boolean }) {
  const info = useKeysStore((s) => s.keys.find((k) => k.provider === provider.id));
  const test = useKeysStore((s) => s.tests[provider.id]);
  const { setKey, setBaseUrl: saveBaseUrl, removeKey, testKey, removeProvider } = useKeysStore.getState();
  const notify = useAppStore((s) => s.notify);
  const [editing, setEditing] = useState(false);
  const [editingUrl, setEditingUrl] = useState(false);
  const [draft, setDraft] = useState('');
  const currentUrl = info?.baseUrl ?? provider.baseUrl;
  const [baseUrl, setBaseUrl] = useState(currentUrl);
  const [busy, setBusy] = useState(false);

  const save = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    const key = draft;
    setDraft(''); // the key leaves the UI now: it is never shown or kept again
    try {
      const url = baseUrl.trim();
      await setKey({ provider: provider.id, key, storage: sessionOnly ? 'session' : 'keychain', baseUrl: url && url !== currentUrl ? url : undefined });
      setEditing(false);
      notify('success', `Saved the ${provider.label} key`);
    } catch (err) {
      notify('error', errorMessage(err));
    } finally {
      setBusy(false);
    }
  };

  const saveUrl = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    try {
      const info = await saveBaseUrl(provider.id, baseUrl.trim());
      setEditingUrl(false);
      notify('success', `${provider.label} now calls ${info.baseUrl}${info.hasKey ? '; its key is unchanged' : ''}`);
    } catch (err) {
      notify('error', errorMessage(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <tr data-provider={provider.id}>
      <td><b>{provider.label}</b><div className="muted mono">{provider.id}</div></td>
      <td className="mono">
        {editingUrl ? (
          <form className="row" onSubmit={(e) => void saveUrl(e)} aria-label={`Change the ${provider.label} base URL`}>
            <input type="url" aria-label={`${provider.label} new base URL`} value={baseUrl} onChange={(e) => setBaseUrl(e.target.value)} required autoFocus style={{ minWidth: 260 }} />
            <button className="btn primary" disabled={busy || !baseUrl.trim() || baseUrl.trim() === currentUrl}>Save URL</button>
            <button type="button" className="btn" onClick={() => setEditingUrl(false)}>Cancel</button>
          </form>
        ) : (
          <span className="row" style={{ gap: 6 }}>
            {currentUrl}
            {!editing && <button className="btn small" title="Point this provider at another server; the stored key stays as it is" onClick={() => { setBaseUrl(currentUrl); setEditingUrl(true); }}>Change URL</button>}
          </span>
        )}
      </td>
      <td>
        {info?.hasKey ? (
          <span className="mono" aria-label={`key ending in ${info.last4}`}>••••{info.last4}</span>
        ) : provider.requiresKey ? <span className="muted">no key</span> : <span className="muted">no key needed</span>}
        {info?.storage === 'session' && <span className="badge warn" style={{ marginLeft: 6 }}>this session only</span>}
        {test && (
          <div className={`mono ${test.status === 'ok' ? 'add-n' : test.status === 'testing' ? 'muted' : 'del-n'}`} role="status">
            {test.status === 'testing' ? 'testing…' : `${test.status}: ${'message' in test ? test.message : ''}`}
          </div>
        )}
      </td>
      <td>
        {editing ? (
          <form className="stack" onSubmit={(e) => void save(e)}>
            <input
              type="url"
              aria-label={`${provider.label} base URL`}
              title="Upstream base URL (change it for a gateway or a local server)"
              value={baseUrl}
              onChange={(e) => setBaseUrl(e.target.value)}
            />
            <div className="row">
            <input
              type="password"
              autoComplete="off"
              spellCheck={false}
              aria-label={`${provider.label} API key`}
              placeholder="paste the key"
              value={draft}
              onChange={(e) => setDraft(e.target.value)}
              autoFocus
            />
            <button className="btn primary" disabled={busy || draft.trim().length === 0}>Save</button>
            <button type="button" className="btn" onClick={() => { setDraft(''); setEditing(false); }}>Cancel</button>
            </div>
          </form>
        ) : (
          <div className="row">
            <button className="btn" onClick={() => { setBaseUrl(currentUrl); setEditingUrl(false); setEditing(true); }}>{info?.hasKey ? 'Replace key' : 'Add key'}</button>
            <button className="btn" onClick={() => void testKey(provider.id)} disabled={provider.requiresKey && !info?.hasKey}>Test</button>
            {info?.hasKey && <button className="btn danger" onClick={() => void removeKey(provider.id)}>Remove key</button>}
            {!provider.builtin && <button className="btn danger" onClick={() => void removeProvider(provider.id)}>Remove provider</button>}
          </div>
        )}
      </td>
    </tr>
  );
}

function AddProviderForm() {
  const addProvider = useKeysStore((s) => s.addProvider);
  const notify = useAppStore((s) => s.notify);
  const [id, setId] = useState('');
  const [baseUrl, setBaseUrl] = useState('http://127.0.0.1:11434/v1');
  const [requiresKey, setRequiresKey] = useState(false);
  const [key, setKeyValue] = useState('');
  const [models, setModels] = useState('');
  const [error, setError] = useState<string>();

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const k = key;
    setKeyValue('');
    try {
      await addProvider({
        id: id.trim(),
        baseUrl: baseUrl.trim(),
        requiresKey,
        key: k.trim() || undefined,
        models: models.split(',').map((m) => m.trim()).filter(Boolean),
      });
      notify('success', `Added provider ${id}`);
      setId('');
      setModels('');
      setError(undefined);
    } catch (err) {
      setError(errorMessage(err));
    }
  };

  return (
    <form className="panel stack" onSubmit={(e) => void submit(e)} aria-label="Add an OpenAI-compatible provider">
      <h2>Add an OpenAI-compatible server</h2>
      <p className="muted" style={{ margin: 0 }}>Ollama, LM Studio, llama.cpp, vLLM, OpenRouter or a company gateway.</p>
      <div className="grid-form">
        <label htmlFor="p-id">Name (id)</label>
        <input id="p-id" type="text" placeholder="ollama" value={id} onChange={(e) => setId(e.target.value)} required />
        <label htmlFor="p-url">Base URL</label>
        <input id="p-url" type="url" value={baseUrl} onChange={(e) => setBaseUrl(e.target.value)} required />
        <label htmlFor="p-models">Models</label>
        <input id="p-models" type="text" placeholder="qwen2.5-coder, llama3.1 (comma separated)" value={models} onChange={(e) => setModels(e.target.value)} />
        <label htmlFor="p-req">Needs a key</label>
        <div><input id="p-req" type="checkbox" checked={requiresKey} onChange={(e) => setRequiresKey(e.target.checked)} /></div>
        {requiresKey && (
          <>
            <label htmlFor="p-key">Key</label>
            <input id="p-key" type="password" autoComplete="off" value={key} onChange={(e) => setKeyValue(e.target.value)} />
          </>
        )}
      </div>
      <ErrorBanner message={error} />
      <div className="row"><button className="btn primary" disabled={!id.trim()}>Add provider</button></div>
    </form>
  );
}

/** Keys & providers: add, test, remove; a saved key is never shown again (only its last 4). */
export function KeysScreen() {
  const { providers, keychain, error, load } = useKeysStore();
  const [sessionOnly, setSessionOnly] = useState(false);
  useEffect(() => {
    void load();
  }, [load]);
  const noKeychain = keychain && !keychain.available;

  return (
    <>
      <h1>Keys &amp; providers</h1>
      <p className="muted" style={{ margin: 0 }}>
        Keys are stored in your OS keychain and never enter a sandbox: each run gets a one-time token that only Airlock's local proxy accepts.
      </p>
      <ErrorBanner message={error} />
      {noKeychain && (
        <div className="banner" role="alert">
          <b>No keychain available.</b> {keychain.message}
          <label className="row" style={{ marginTop: 6 }}>
            <input type="checkbox" checked={sessionOnly} onChange={(e) => setSessionOnly(e.target.checked)} /> Keep keys for this session only (in memory, gone when Airlock quits)
          </label>
        </div>
      )}
      <section className="panel">
        <table>
          <thead><tr><th>Provider</th><th>Base URL</th><th>Key</th><th /></tr></thead>
          <tbody>
            {providers.filter((p) => !p.credential).map((p) => <KeyRow key={p.id} provider={p} sessionOnly={Boolean(noKeychain && sessionOnly)} />)}
          </tbody>
        </table>
      </section>
      <SubscriptionKeys providers={providers.filter((p) => p.credential)} storage={noKeychain && sessionOnly ? 'session' : 'keychain'} />
      <AddProviderForm />
    </>
  );
}
