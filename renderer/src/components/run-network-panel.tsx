import { useState, type FormEvent } from 'react';
import type { NetworkAllowScope, NetworkPolicy } from '../../../contracts';
import { useAction } from '../hooks/use-action';
import { ALLOW_SCOPE_LABELS, ALLOW_SCOPE_OPTIONS } from '../lib/option-labels';
import { useAppStore } from '../stores/app-store';
import { useNetworkStore } from '../stores/network-store';

const EMPTY: never[] = [];

/** Parses a port field: empty is `undefined`, anything else must be an integer 1–65535. */
export function parsePort(text: string): number | undefined | Error {
  const t = text.trim();
  if (!t) return undefined;
  const n = Number(t);
  return Number.isInteger(n) && n >= 1 && n <= 65535 ? n : new Error(`"${t}" is not a port; enter a number from 1 to 65535.`);
}

async function copy(text: string): Promise<void> {
  try {
    await navigator.clipboard.writeText(text);
    useAppStore.getState().notify('success', `Copied ${text}`);
  } catch {
    useAppStore.getState().notify('error', `Could not copy; select the link and copy it: ${text}`);
  }
}

/**
 * Publishes sandbox ports of a live run on the host's loopback and lists them as links (on localhost:
 * not the UI's site). `offered` are the devcontainer's `forwardPorts`: one click each, never published
 * unasked (docs/architecture.md §16).
 */
export function PreviewPortsForm({ runId, offered = EMPTY }: { runId: string; offered?: readonly number[] }) {
  const ports = useNetworkStore((s) => s.ports[runId] ?? EMPTY);
  const unpublished = offered.filter((o) => !ports.some((p) => p.sandboxPort === o));
  const [port, setPort] = useState('');
  const { busy, error, setError, run } = useAction();

  const publish = (n: number, clear: boolean) => run(async () => {
    await useNetworkStore.getState().publish(runId, n);
    if (clear) setPort('');
  });
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const parsed = parsePort(port);
    if (parsed === undefined || parsed instanceof Error) {
      setError(parsed?.message ?? 'Enter the port a server in the sandbox listens on (e.g. 3000).');
      return;
    }
    await publish(parsed, true);
  };

  return (
    <div className="stack" aria-label="Preview ports" role="group">
      <form className="row" onSubmit={(e) => void submit(e)} aria-label="Publish a preview port">
        <label htmlFor={`pp-${runId}`}>Preview port</label>
        <input
          id={`pp-${runId}`}
          type="number"
          inputMode="numeric"
          min={1}
          max={65535}
          placeholder="3000"
          value={port}
          onChange={(e) => setPort(e.target.value)}
          style={{ width: 110 }}
          aria-invalid={error ? true : undefined}
          aria-describedby={error ? `pp-err-${runId}` : undefined}
        />
        <button className="btn" type="submit" disabled={busy || !port.trim()}>{busy ? 'Publishing…' : 'Publish'}</button>
        <span className="muted" style={{ fontSize: 12 }}>on this machine's loopback only, as localhost; closed when the run ends</span>
      </form>
      {unpublished.length > 0 && (
        <div className="row" role="group" aria-label="Forwarded ports" style={{ fontSize: 13 }}>
          <span className="muted">The devcontainer forwards:</span>
          {unpublished.map((n) => (
            <button key={n} type="button" className="btn small" disabled={busy} onClick={() => void publish(n, false)} aria-label={`Publish forwarded port ${n}`}>
              Publish {n}
            </button>
          ))}
        </div>
      )}
      {error && <div id={`pp-err-${runId}`} className="del-n" role="alert">{error}</div>}
      {ports.length > 0 && (
        <ul className="stack" aria-label="Published ports" style={{ listStyle: 'none', margin: 0, padding: 0, gap: 4 }}>
          {ports.map((p) => (
            <li key={p.sandboxPort} className="row" data-sandbox-port={p.sandboxPort}>
              <span className="mono">{p.sandboxPort} →</span>
              {/* The browser opens it in a new tab; the desktop app opens only https links outside, so Copy is there too. */}
              <a className="mono" href={p.url} target="_blank" rel="noopener noreferrer">{p.url}</a>
              <button className="btn small" type="button" onClick={() => void copy(p.url)} aria-label={`Copy ${p.url}`}>Copy</button>
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

/** Lets a host the egress proxy denied through while the run goes on (allow-list policy). */
export function AllowHostForm({ runId }: { runId: string }) {
  const blocked = useNetworkStore((s) => s.blocked[runId] ?? EMPTY);
  const [host, setHost] = useState('');
  const [port, setPort] = useState('');
  const [scope, setScope] = useState<NetworkAllowScope>('run');
  const { busy, error, setError, run } = useAction();
  const [done, setDone] = useState<string>();

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const name = host.trim();
    if (!name) {
      setError('Enter the host name to allow (e.g. registry.example.org).');
      return;
    }
    const parsed = parsePort(port);
    if (parsed instanceof Error) {
      setError(parsed.message);
      return;
    }
    setDone(undefined);
    await run(async () => {
      await useNetworkStore.getState().allow(runId, name, parsed, scope);
      setDone(`Allowed ${name}${parsed ? `:${parsed}` : ''} (${ALLOW_SCOPE_LABELS[scope]}).`);
      setHost('');
      setPort('');
    });
  };

  return (
    <div className="stack" role="group" aria-label="Allow a host">
      <form className="row" onSubmit={(e) => void submit(e)} aria-label="Allow host">
        <label htmlFor={`ah-${runId}`}>Allow host</label>
        <input
          id={`ah-${runId}`}
          type="text"
          placeholder="registry.example.org"
          value={host}
          onChange={(e) => setHost(e.target.value)}
          spellCheck={false}
          autoCapitalize="off"
          maxLength={253}
          aria-invalid={error ? true : undefined}
          aria-describedby={error ? `ah-err-${runId}` : undefined}
        />
        <input type="number" inputMode="numeric" min={1} max={65535} placeholder="any port" aria-label="Port (optional)" value={port} onChange={(e) => setPort(e.target.value)} style={{ width: 100 }} />
        <select aria-label="Scope" value={scope} onChange={(e) => setScope(ALLOW_SCOPE_OPTIONS.parse(e.target.value))}>
          {ALLOW_SCOPE_OPTIONS.options.map((s) => <option key={s.value} value={s.value}>{s.label}</option>)}
        </select>
        <button className="btn" type="submit" disabled={busy || !host.trim()}>{busy ? 'Allowing…' : 'Allow'}</button>
      </form>
      {blocked.length > 0 && (
        <div className="row" aria-label="Recently blocked" style={{ fontSize: 13 }}>
          <span className="muted">Blocked:</span>
          {blocked.slice().reverse().map((b) => (
            <button
              key={`${b.host}:${b.port}`}
              type="button"
              className="btn small"
              title={`${b.method} ${b.host}:${b.port} was denied — fill the form with it`}
              onClick={() => { setHost(b.host); setPort(String(b.port)); setError(undefined); setDone(undefined); }}
            >
              {b.host}:{b.port}
            </button>
          ))}
        </div>
      )}
      {error && <div id={`ah-err-${runId}`} className="del-n" role="alert">{error}</div>}
      {done && <div className="add-n" role="status">{done}</div>}
    </div>
  );
}

/** The network controls of a live run: preview ports always, "allow host" under the allow-list policy. */
export function RunNetworkPanel({ runId, network, forwardPorts }: { runId: string; network: NetworkPolicy; forwardPorts?: readonly number[] }) {
  return (
    <section className="panel stack" aria-label="Network">
      <PreviewPortsForm runId={runId} {...(forwardPorts ? { offered: forwardPorts } : {})} />
      {network === 'allowlist' && <AllowHostForm runId={runId} />}
    </section>
  );
}
