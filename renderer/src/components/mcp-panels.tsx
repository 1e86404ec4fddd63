import { useCallback, useEffect, useState } from 'react';
import { FINAL_RUN_STATUSES, type McpApplyRequest, type McpFolderRequest, type McpInfo, type McpProjectGrant } from '../../../contracts';
import { errorInfo } from '../api';
import { useAppStore } from '../stores/app-store';
import { useMcpDoorStore } from '../stores/mcp-door-store';
import { useRunsStore } from '../stores/runs-store';
import { useSettingsStore } from '../stores/settings-store';
import { ErrorBanner } from './common';

/**
 * The MCP door in the UI (docs/architecture.md §17): the loopback HTTP door's address (its switch is a setting) and
 * the setup lines with copy buttons; and the banner where the user answers an MCP client's request
 * to apply a result, seeing who asks and the exact change.
 */

async function copy(text: string): Promise<void> {
  try {
    await navigator.clipboard.writeText(text);
    useAppStore.getState().notify('info', 'Copied.');
  } catch {
    useAppStore.getState().notify('error', 'Could not copy: the clipboard was refused. Select the text and press Ctrl+C (⌘C) instead.');
  }
}

/**
 * Settings → MCP: the HTTP door's address (its switch is a setting, saved with the form's Save) and one
 * setup line per client, each with Copy.
 */
export function McpSettingsPanel() {
  const [info, setInfo] = useState<McpInfo>();
  const [error, setError] = useState<ReturnType<typeof errorInfo>>();
  const httpSaved = useSettingsStore((s) => s.settings?.mcpHttp === true);
  const load = useCallback(async (): Promise<McpInfo | undefined> => {
    try {
      const next = await useMcpDoorStore.getState().info();
      setInfo(next);
      return next;
    } catch (e) {
      setError(errorInfo(e));
      return undefined;
    }
  }, []);
  // The saved switch changed: the door opens (or closes) in the background, so ask until it has an
  // address, says why not, or is gone.
  useEffect(() => {
    let live = true;
    void (async () => {
      for (let i = 0; i < 40 && live; i++) {
        const next = await load();
        if (!next || (httpSaved ? next.http.url || next.http.error : !next.http.url)) break;
        await new Promise((r) => setTimeout(r, 250));
      }
    })();
    return () => {
      live = false;
    };
  }, [load, httpSaved]);
  return (
    <section className="panel" aria-labelledby="s-mcp-title">
      <h2 id="s-mcp-title">MCP (Claude Code, Codex, Cursor, VS Code)</h2>
      <p className="muted">Host agents create sandboxes and runs through <span className="mono">airlock mcp</span>. Nothing is applied to a project without your yes here.</p>
      {error && <ErrorBanner error={error} />}
      {info?.http.enabled && !info.http.url && !info.http.error && <p className="muted">Opening the HTTP door…</p>}
      {info?.http.url && <div className="mono" data-mcp-url>{info.http.url}</div>}
      {info?.http.error && <ErrorBanner message={`The HTTP door did not open: ${info.http.error}`} />}
      <McpGrantsEditor />
      {info && !info.command.onPath && (
        <div className="hint" role="note" aria-label="Command used">
          <span className="mono">airlock</span> is not on your PATH, so these lines start it by its full path (<span className="mono">{info.command.text}</span>). Run{' '}
          <span className="mono">npm link</span> in Airlock's folder to use a bare <span className="mono">airlock</span>.
        </div>
      )}
      <SetupTest />
      <McpClientsList />
      {info?.setup.map((line) => (
        <div key={line.client} className="mcp-setup" data-client={line.client}>
          <div className="row"><strong>{line.label}</strong><button type="button" onClick={() => void copy(line.text)} aria-label={`Copy the ${line.label} setup`}>Copy</button></div>
          <pre className="mono">{line.text}</pre>
        </div>
      ))}
    </section>
  );
}

/**
 * The MCP clients that have used Airlock, from the run history: each name as the client gave it (a
 * claim, shown as such), how many sandboxes it made, whether one is live, and when it was last seen.
 */
function McpClientsList() {
  const runs = useRunsStore((s) => s.runs);
  const clients = new Map<string, { sandboxes: number; live: number; last: string }>();
  for (const r of Object.values(runs)) {
    if (!r.mcpClient) continue;
    const c = clients.get(r.mcpClient) ?? { sandboxes: 0, live: 0, last: r.createdAt };
    c.sandboxes += 1;
    if (!FINAL_RUN_STATUSES.includes(r.status)) c.live += 1;
    if (r.createdAt > c.last) c.last = r.createdAt;
    clients.set(r.mcpClient, c);
  }
  const list = [...clients].sort((a, b) => b[1].last.localeCompare(a[1].last));
  return (
    <div aria-label="MCP clients" role="group">
      <h3>Clients</h3>
      {list.length === 0 ? <p className="muted">No MCP client has made a sandbox yet.</p> : (
        <ul className="mcp-clients">
          {list.map(([name, c]) => (
            <li key={name} data-mcp-client={name}>
              <strong>{name}</strong> <span className="muted">(as it names itself)</span> · {c.sandboxes} sandbox{c.sandboxes === 1 ? '' : 'es'}{c.live ? `, ${c.live} live` : ''} · last {new Date(c.last).toLocaleString()}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

/** Starts the stdio lines' command as a client would and lists its tools: the setup works before a client is pointed at it. */
function SetupTest() {
  const [state, setState] = useState<{ busy: boolean; text?: string; ok?: boolean }>({ busy: false });
  const test = async () => {
    setState({ busy: true });
    try {
      const r = await useMcpDoorStore.getState().testSetup();
      setState({ busy: false, ok: r.ok, text: r.ok ? `Works: airlock mcp answered with ${r.tools} tools in ${(r.ms / 1000).toFixed(1)} s.` : (r.error ?? 'It did not answer.') });
    } catch (e) {
      setState({ busy: false, ok: false, text: errorInfo(e).message });
    }
  };
  return (
    <div className="row">
      <button type="button" className="btn small" onClick={() => void test()} disabled={state.busy}>{state.busy ? 'Testing…' : 'Test the stdio setup'}</button>
      {state.text && <span className={state.ok ? 'add-n' : 'del-n'} role="status" aria-label="Setup test">{state.text}</span>}
    </div>
  );
}

/** One waiting request, with the host's rendering of exactly the patch it would apply. */
function ApplyRequestCard({ req, onAnswered }: { req: McpApplyRequest; onAnswered: () => void }) {
  const [patch, setPatch] = useState<{ text?: string; sha256: string; bytes: number }>();
  const [error, setError] = useState<ReturnType<typeof errorInfo>>();
  useEffect(() => {
    useMcpDoorStore.getState().previewPatch(req.runId, req.files).then(setPatch, (e: unknown) => setError(errorInfo(e)));
  }, [req.runId, req.files]);
  // The digest the client reviewed must be the host's own rendering of what would be written.
  const matches = patch?.sha256 === req.reviewedSha256;
  const answer = async (approved: boolean) => {
    try {
      const answered = await useMcpDoorStore.getState().answerApply(req.requestId, approved);
      useAppStore.getState().notify(answered ? 'info' : 'error', answered ? (approved ? 'Approved: the change is being applied.' : 'Refused: nothing is written.') : 'That request expired or was answered already.');
      onAnswered();
    } catch (e) {
      setError(errorInfo(e));
    }
  };
  return (
    <div className="panel mcp-apply" role="dialog" aria-label={`Apply request from ${req.client}`} data-request={req.requestId}>
      <h2>An MCP client asks to apply a change</h2>
      <p>
        <strong data-client-name>{req.client}</strong> (as it names itself) asks to apply run <span className="mono">{req.runId}</span> to{' '}
        <span className="mono">{req.target}</span>{req.branch ? <> as branch <span className="mono">{req.branch}</span></> : ' (working tree)'}.
      </p>
      <p className="muted">{req.files.length} file(s): {req.files.join(', ')} · {req.patchBytes} bytes · sha256 <span className="mono">{req.reviewedSha256.slice(0, 16)}…</span></p>
      {error && <ErrorBanner error={error} />}
      {patch && !matches && <ErrorBanner message="The patch Airlock has for this run is not the one the client reviewed; refuse this request." />}
      {req.flags?.length ? (
        <ul className="mcp-flags" data-flags>
          {req.flags.map((f) => <li key={f.path}><span className="mono">{f.path}</span>: {f.reason}</li>)}
        </ul>
      ) : null}
      {patch?.text !== undefined ? <pre className="mono mcp-patch" data-patch>{patch.text}</pre> : patch && <p className="muted">The patch is too large to show here; open the run's Review screen.</p>}
      <div className="row">
        {/* What cannot be shown is not approved from here (the same rule as Review). */}
        <button type="button" className="primary" disabled={!matches || patch?.text === undefined} onClick={() => void answer(true)}>Approve and apply</button>
        <button type="button" onClick={() => void answer(false)}>Refuse</button>
      </div>
    </div>
  );
}

/** Every waiting apply request of an MCP client, refetched when the core says they changed. */
export function McpApplyRequests() {
  const [requests, setRequests] = useState<McpApplyRequest[]>([]);
  const load = useCallback(() => {
    // A failed read keeps the last list; the next change event reads again.
    useMcpDoorStore.getState().applyRequests().then(setRequests, () => undefined);
  }, []);
  useEffect(() => {
    load();
    return useMcpDoorStore.getState().onRequestsChange('apply', load);
  }, [load]);
  if (!requests.length) return null;
  return (
    <div className="mcp-apply-area">
      {requests.map((r) => <ApplyRequestCard key={r.requestId} req={r} onAnswered={load} />)}
    </div>
  );
}

const NO_GRANTS: McpProjectGrant[] = [];

/** Settings → MCP → Project folders: what clients may use, with the network and continuation each allows. */
function McpGrantsEditor() {
  const grants = useSettingsStore((s) => s.settings?.mcpProjects) ?? NO_GRANTS;
  const [dir, setDir] = useState('');
  const [allow, setAllow] = useState('');
  const [open, setOpen] = useState(false);
  const [error, setError] = useState<ReturnType<typeof errorInfo>>();
  // Saved at once (not with the form's Save): the form takes settings saved elsewhere into fields it has not edited.
  const save = async (next: McpProjectGrant[]) => {
    try {
      await useSettingsStore.getState().update({ mcpProjects: next });
      setError(undefined);
    } catch (e) {
      setError(errorInfo(e));
    }
  };
  const add = () => {
    const domains = allow.split(/[\s,]+/).filter(Boolean);
    if (!dir.trim()) return;
    void save([...grants.filter((g) => g.dir !== dir.trim()), { dir: dir.trim(), ...(domains.length ? { allow: domains } : {}), ...(open ? { openNetwork: true } : {}) }]);
    setDir('');
    setAllow('');
    setOpen(false);
  };
  return (
    <div className="mcp-grants" aria-labelledby="s-mcp-grants">
      <h3 id="s-mcp-grants">Project folders clients may use</h3>
      <p className="muted">Any other folder is asked for here while the app is open, and refused otherwise. Never your home folder, system folders or a folder holding keys.</p>
      {error && <ErrorBanner error={error} />}
      <ul>
        {grants.map((g) => (
          <li key={g.dir} className="row" data-grant={g.dir}>
            <span className="mono">{g.dir}</span>
            <span className="muted">{g.openNetwork ? 'open network' : g.allow?.length ? `allowlist: ${g.allow.join(', ')}` : 'no network'}</span>
            <button type="button" onClick={() => void save(grants.filter((x) => x.dir !== g.dir))} aria-label={`Remove ${g.dir}`}>Remove</button>
          </li>
        ))}
      </ul>
      <div className="row">
        <input id="s-mcp-grant-dir" placeholder="/absolute/path/to/project" value={dir} onChange={(e) => setDir(e.target.value)} aria-label="Project folder" />
        <input id="s-mcp-grant-allow" placeholder="allowed domains (optional)" value={allow} onChange={(e) => setAllow(e.target.value)} aria-label="Allowed domains" />
        <label className="check-label"><input type="checkbox" checked={open} onChange={(e) => setOpen(e.target.checked)} /> open network</label>
        <button type="button" onClick={add}>Add</button>
      </div>
    </div>
  );
}

/** A client asks for a folder the user has not granted: "Claude Code wants a sandbox of ~/src/app". */
export function McpFolderRequests() {
  const [requests, setRequests] = useState<McpFolderRequest[]>([]);
  const load = useCallback(() => {
    // A failed read keeps the last list; the next change event reads again.
    useMcpDoorStore.getState().folderRequests().then(setRequests, () => undefined);
  }, []);
  useEffect(() => {
    load();
    return useMcpDoorStore.getState().onRequestsChange('folder', load);
  }, [load]);
  const answer = async (req: McpFolderRequest, approved: boolean, remember = false) => {
    try {
      const answered = await useMcpDoorStore.getState().answerFolder(req.requestId, approved, remember);
      if (!answered) useAppStore.getState().notify('error', 'That request expired or was answered already.');
    } catch (e) {
      useAppStore.getState().notify('error', errorInfo(e).message);
    }
    load();
  };
  if (!requests.length) return null;
  return (
    <div className="mcp-apply-area">
      {requests.map((req) => (
        <div key={req.requestId} className="panel mcp-folder" role="dialog" aria-label={`Folder request from ${req.client}`} data-folder-request={req.requestId}>
          <p>
            <strong>{req.client}</strong> (as it names itself) wants {req.purpose === 'run' ? 'an agent run on' : 'a sandbox of'} <span className="mono">{req.projectDir}</span>.
          </p>
          <div className="row">
            <button type="button" className="primary" onClick={() => void answer(req, true)}>Allow once</button>
            <button type="button" onClick={() => void answer(req, true, true)}>Always allow this folder</button>
            <button type="button" onClick={() => void answer(req, false)}>Refuse</button>
          </div>
        </div>
      ))}
    </div>
  );
}
