import { useEffect, useRef, useState, type FormEvent } from 'react';
import type { ProviderInfo } from '../../../contracts';
import { ApiError, errorMessage } from '../api';
import { useAppStore } from '../stores/app-store';
import { useKeysStore } from '../stores/keys-store';
import { useRunsStore } from '../stores/runs-store';
import { ConfirmInline, ErrorBanner } from './common';
import { SubscriptionKeys } from './subscription-keys';
import { useAction } from '../hooks/use-action';

function KeyRow({ provider, sessionOnly }: { provider: ProviderInfo; sessionOnly: boolean }) {
  const info = useKeysStore((s) => s.keys.find((k) => k.provider === provider.id));
  const test = useKeysStore((s) => s.tests[provider.id]);
  const { setKey, setBaseUrl: saveBaseUrl, removeKey, testKey, removeProvider } = useKeysStore.getState();
  const notify = useAppStore((s) => s.notify);
  const [editing, setEditing] = useState(false);
  const [editingUrl, setEditingUrl] = useState(false);
  // The key is never React state: an uncontrolled field holds it (no value attribute in the page), so a
  // refused key stays in its field to be corrected without being written into the markup.
  const keyField = useRef<HTMLInputElement>(null);
  const [hasDraft, setHasDraft] = useState(false);
  const currentUrl = info?.baseUrl ?? provider.baseUrl;
  const [baseUrl, setBaseUrl] = useState(currentUrl);
  const { busy, run } = useAction();
  const [removing, setRemoving] = useState(false);
  /** A refusal, shown at the field it is about (the key stays in its field to be corrected). */
  const [fieldError, setFieldError] = useState<{ field: 'key' | 'baseUrl'; message: string }>();
  const keyId = `k-${provider.id}-key`;
  const urlId = `k-${provider.id}-url`;

  const save = async (e: FormEvent) => {
    e.preventDefault();
    setFieldError(undefined);
    await run(async () => {
      const url = baseUrl.trim();
      await setKey({ provider: provider.id, key: keyField.current?.value ?? '', storage: sessionOnly ? 'session' : 'keychain', baseUrl: url && url !== currentUrl ? url : undefined });
      // Stored: the key leaves the UI, never shown or kept again.
      if (keyField.current) keyField.current.value = '';
      setHasDraft(false);
      setEditing(false);
      notify('success', `Saved the ${provider.label} key`);
    }, (err) => {
      setFieldError({ field: err instanceof ApiError && err.info.field === 'baseUrl' ? 'baseUrl' : 'key', message: errorMessage(err) });
      return true;
    });
  };
  const errorAt = (field: 'key' | 'baseUrl') => fieldError?.field === field
    ? <div className="field-error" role="alert" id={`${field === 'key' ? keyId : urlId}-error`}>{fieldError.message}</div>
    : null;

  const saveUrl = async (e: FormEvent) => {
    e.preventDefault();
    setFieldError(undefined);
    await run(async () => {
      const info = await saveBaseUrl(provider.id, baseUrl.trim());
      setEditingUrl(false);
      notify('success', `${provider.label} now calls ${info.baseUrl}${info.hasKey ? '; its key is unchanged' : ''}`);
    }, (err) => {
      setFieldError({ field: 'baseUrl', message: errorMessage(err) });
      return true;
    });
  };

  return (
    <tr data-provider={provider.id}>
      <td><b>{provider.label}</b><div className="muted mono">{provider.id}</div></td>
      <td className="mono">
        {editingUrl ? (
          <form className="stack" onSubmit={(e) => void saveUrl(e)} aria-label={`Change the ${provider.label} base URL`}>
            <label className="field-label" htmlFor={`${urlId}-new`}>New base URL</label>
            <div className="row">
              <input id={`${urlId}-new`} type="url" aria-label={`${provider.label} new base URL`} aria-invalid={fieldError?.field === 'baseUrl'} aria-describedby={fieldError?.field === 'baseUrl' ? `${urlId}-error` : undefined} value={baseUrl} onChange={(e) => setBaseUrl(e.target.value)} required autoFocus style={{ minWidth: 220 }} />
              <button className="btn primary" disabled={busy || !baseUrl.trim() || baseUrl.trim() === currentUrl}>Save URL</button>
              <button type="button" className="btn" onClick={() => { setEditingUrl(false); setFieldError(undefined); }}>Cancel</button>
            </div>
            {errorAt('baseUrl')}
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
            <label className="field-label" htmlFor={urlId}>Base URL</label>
            <input
              id={urlId}
              type="url"
              aria-label={`${provider.label} base URL`}
              aria-invalid={fieldError?.field === 'baseUrl'}
              aria-describedby={fieldError?.field === 'baseUrl' ? `${urlId}-error` : undefined}
              title="Upstream base URL (change it for a gateway or a local server)"
              value={baseUrl}
              onChange={(e) => setBaseUrl(e.target.value)}
            />
            {errorAt('baseUrl')}
            <label className="field-label" htmlFor={keyId}>API key</label>
            <div className="row">
            <input
              id={keyId}
              type="password"
              autoComplete="off"
              spellCheck={false}
              aria-label={`${provider.label} API key`}
              aria-invalid={fieldError?.field === 'key'}
              aria-describedby={fieldError?.field === 'key' ? `${keyId}-error` : undefined}
              placeholder="paste the key"
              ref={keyField}
              onChange={(e) => { setHasDraft(e.target.value.trim().length > 0); setFieldError(undefined); }}
              autoFocus
            />
            <button className="btn primary" disabled={busy || !hasDraft}>Save</button>
            <button type="button" className="btn" onClick={() => { setHasDraft(false); setEditing(false); setFieldError(undefined); }}>Cancel</button>
            </div>
            {errorAt('key')}
          </form>
        ) : (
          <div className="row">
            <button className="btn" onClick={() => { setBaseUrl(currentUrl); setEditingUrl(false); setEditing(true); }}>{info?.hasKey ? 'Replace key' : 'Add key'}</button>
            <button className="btn" onClick={() => void testKey(provider.id)} disabled={provider.requiresKey && !info?.hasKey}>Test</button>
            {info?.hasKey && !removing && <button className="btn danger" onClick={() => setRemoving(true)}>Remove key</button>}
            {info?.hasKey && removing && (
              <ConfirmInline
                label="Confirm remove key"
                question={<>Remove the {provider.label} key{info.storage === 'keychain' ? ' from the OS keychain' : ''}? Runs with {provider.id} stop working until you add one again.</>}
                confirm="Remove key"
                cancel="Keep"
                onConfirm={() => { setRemoving(false); void removeKey(provider.id); }}
                onCancel={() => setRemoving(false)}
              />
            )}
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
  const { busy, error, run } = useAction();

  const submit = (e: FormEvent) => {
    e.preventDefault();
    const k = key;
    setKeyValue('');
    void run(async () => {
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
    });
  };

  return (
    <form className="panel stack" onSubmit={submit} aria-label="Add an OpenAI-compatible provider">
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
      <div className="row"><button className="btn primary" disabled={busy || !id.trim()}>Add provider</button></div>
    </form>
  );
}

/** Keys & providers: add, test, remove; a saved key is never shown again (only its last 4). */
export function KeysScreen() {
  const { providers, keys, keychain, error, load, loaded } = useKeysStore();
  const [sessionOnly, setSessionOnly] = useState(false);
  const noneYet = loaded && !keys.some((k) => k.hasKey);
  // A key and no run yet: the next step is a run (polish list: nothing pointed there after the first key).
  const runsLoaded = useRunsStore((s) => s.loaded);
  const noRunsYet = useRunsStore((s) => s.order.length === 0);
  const firstRunNext = loaded && !noneYet && runsLoaded && noRunsYet;
  const navigate = useAppStore((s) => s.navigate);
  useEffect(() => {
    void load();
    void useRunsStore.getState().load().catch(() => undefined);
  }, [load]);
  const noKeychain = keychain && !keychain.available;

  return (
    <>
      <h1>Keys &amp; providers</h1>
      <p className="muted" style={{ margin: 0 }}>
        Keys are stored in your OS keychain and never enter a sandbox: each run gets a one-time token that only Airlock's local proxy accepts.
      </p>
      <ErrorBanner message={error} />
      {noneYet && (
        <div className="banner start-here" role="note" aria-label="Start here">
          <b>Start here: add one provider key.</b> Press <b>Add key</b> next to Anthropic or OpenAI (or add a local server below) — that is all a first run needs.
        </div>
      )}
      {firstRunNext && (
        <div className="banner info" role="note" aria-label="Next step">
          <b>Ready for a first run.</b> Your key is stored.{' '}
          <button className="btn small primary" onClick={() => navigate({ name: 'new' })}>Start a first run</button>
        </div>
      )}
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
