import { useEffect, useState, type FormEvent } from 'react';
import type { McpServerView, McpToolView, ProposedMcpServerView } from '../../../contracts';
import { errorMessage } from '../api';
import { useAction } from '../hooks/use-action';
import { useAppStore } from '../stores/app-store';
import { useMcpServersStore } from '../stores/mcp-servers-store';
import { useNewRunForm } from '../stores/new-run-form-store';
import { ConfirmInline, ErrorBanner } from './common';

type AuthKind = 'none' | 'bearer' | 'header' | 'oauth';
type RuleChoice = 'allow' | 'ask' | 'deny' | 'default';

function authText(s: McpServerView): string {
  if (s.auth.type === 'none') return 'none';
  if (s.auth.type === 'oauth') return s.hasCredential ? 'OAuth, signed in on the host' : 'OAuth, not signed in';
  const how = s.auth.type === 'bearer' ? 'bearer' : `header ${s.auth.name}`;
  return `${how} from the keychain`;
}

function claims(t: McpToolView): string {
  const a = t.annotations;
  const words = [a.readOnlyHint ? 'read-only' : '', a.destructiveHint ? 'destructive' : '', a.openWorldHint ? 'open-world' : ''].filter(Boolean);
  return words.length ? `says: ${words.join(', ')}` : '';
}

const PIN_TEXT: Record<McpToolView['pin'], string> = {
  same: 'pinned',
  changed: 'description changed since pinned: asks before each call',
  new: 'not pinned: asks before each call',
};

/** A tool's rule and pin, with the server's own words and claims; changing the rule saves it. */
function ToolRow({ server, tool, onRule }: { server: string; tool: McpToolView; onRule: (tool: string, rule: RuleChoice) => void }) {
  const choice: RuleChoice = tool.ownRule ? tool.rule : 'default';
  return (
    <tr data-tool={tool.tool}>
      <td className="mono">{tool.tool}</td>
      <td>
        <div>{tool.description || <span className="muted">(no description)</span>}</div>
        {claims(tool) && <div className="muted" data-claims>[{claims(tool)}] (the server's claim)</div>}
      </td>
      <td data-pin={tool.pin} className={tool.pin === 'same' ? 'muted' : 'del-n'}>{PIN_TEXT[tool.pin]}</td>
      <td>
        <select aria-label={`Rule for ${server} ${tool.tool}`} value={choice} onChange={(e) => onRule(tool.tool, e.target.value as RuleChoice)}>
          <option value="default">default{tool.ownRule ? '' : ` (${tool.rule})`}</option>
          <option value="allow">allow</option>
          <option value="ask">ask</option>
          <option value="deny">deny</option>
        </select>
      </td>
    </tr>
  );
}

/** One server's tools as it offers them now, each with its rule; pin shows they were seen. */
function ServerTools({ server }: { server: McpServerView }) {
  const tools = useMcpServersStore((s) => s.tools[server.name]);
  const store = useMcpServersStore.getState;
  const { busy, error, run } = useAction();
  useEffect(() => void run(() => store().loadTools(server.name)), [server.name]);
  const setRule = (tool: string, rule: RuleChoice) => void run(() => store().setRule(server.name, tool, rule));
  const pin = () =>
    void run(async () => {
      const pinned = await store().pin(server.name);
      useAppStore.getState().notify('success', `${server.name}: ${pinned.tools.length} tool descriptions pinned`);
    });
  const rest = server.policy['*'];
  const unpinned = tools?.tools.filter((t) => t.pin !== 'same').length ?? 0;
  return (
    <section className="panel stack" aria-label={`Tools of ${server.name}`}>
      <h2>Tools of {server.name}</h2>
      <p className="muted">
        A tool without a rule asks before each call. Descriptions and claims are the server's own words; a description that changes after you pinned it asks again.
      </p>
      <label className="row">
        Every tool without its own rule
        <select aria-label={`Rule for ${server.name} every other tool`} value={rest ?? 'default'} onChange={(e) => setRule('*', e.target.value as RuleChoice)}>
          <option value="default">ask (default)</option>
          <option value="allow">allow</option>
          <option value="ask">ask</option>
          <option value="deny">deny</option>
        </select>
      </label>
      {error && <ErrorBanner message={error} />}
      {tools === undefined ? (
        <div className="muted">{busy ? 'Connecting…' : ''}</div>
      ) : (
        <>
          <div className="scroll-x">
            <table>
              <thead><tr><th>Tool</th><th>What the server says it does</th><th>Pin</th><th>Rule</th></tr></thead>
              <tbody>{tools.tools.map((t) => <ToolRow key={t.tool} server={server.name} tool={t} onRule={setRule} />)}</tbody>
            </table>
          </div>
          {tools.cut && <div className="muted">The server offers more tools than Airlock lists (200).</div>}
          <div className="row">
            <button className="btn" disabled={busy} onClick={pin}>{unpinned ? `Pin ${unpinned} changed or new description${unpinned === 1 ? '' : 's'}` : 'Pin descriptions again'}</button>
          </div>
        </>
      )}
    </section>
  );
}

/**
 * What the user's other MCP clients (Claude Code, Codex, Cursor, VS Code) and a project's files
 * configure: listed to import, never enabled by being there.
 */
function Proposals({ onImport }: { onImport: (p: ProposedMcpServerView) => void }) {
  const formProject = useNewRunForm((s) => s.draft.projectDir);
  const [dir, setDir] = useState(formProject);
  const found = useMcpServersStore((s) => s.proposals);
  const { busy, error, run } = useAction();
  const look = (e?: FormEvent) => {
    e?.preventDefault();
    const projectDir = dir.trim();
    void run(() => useMcpServersStore.getState().lookForProposals(projectDir || undefined));
  };
  useEffect(() => look(), []);
  return (
    <section className="panel stack" aria-label="Found in your other MCP clients">
      <h2>Found in your other MCP clients</h2>
      <p className="muted">
        What Claude Code, Codex, Cursor and VS Code already configure, and a project's <code>.mcp.json</code> (a request from the project): shown here, never used until you add a server yourself. Header and environment values are never read out.
      </p>
      <form className="row" onSubmit={look} aria-label="Project to read">
        <label className="row">Project folder <input aria-label="Project folder" value={dir} onChange={(e) => setDir(e.target.value)} spellCheck={false} autoCapitalize="off" placeholder="/path/to/project" /></label>
        <button className="btn" type="submit" disabled={busy}>Look again</button>
      </form>
      {error && <ErrorBanner message={error} />}
      {found && (found.proposed.length === 0 ? (
        <div className="muted">Nothing found{found.proposedFile ? ` (${found.proposedFile} proposes no servers)` : ''}.</div>
      ) : (
        <ul className="stack" aria-label="Proposed servers">
          {found.proposed.map((p) => (
            <li key={`${p.source}/${p.name}`} data-proposed={p.name} data-source={p.source}>
              <span className="mono">{p.name}</span> <span className="muted">({p.transport})</span>{' '}
              <span className="mono">{p.transport === 'stdio' ? p.command : p.url}</span>
              {p.secretNames.length > 0 && <span className="muted"> sets {p.secretNames.join(', ')} (values not shown)</span>}
              <div className="muted">from {p.source}; not enabled
                {p.added ? (
                  ' (a server of yours has this name; only yours is used)'
                ) : p.transport === 'stdio' ? (
                  ' (local servers are not served by the gateway yet)'
                ) : (
                  <> <button className="btn small" onClick={() => onImport(p)} aria-label={`Import ${p.name} from ${p.source}`}>Import…</button></>
                )}
              </div>
            </li>
          ))}
        </ul>
      ))}
    </section>
  );
}

/**
 * Which of the user's servers a project's runs get by default (docs/architecture.md §20 "Enabled per
 * project"): the New run form preselects them and `airlock run` uses them when no `--mcp` is given.
 */
function ProjectServers({ servers }: { servers: McpServerView[] }) {
  const formProject = useNewRunForm((s) => s.draft.projectDir);
  const [dir, setDir] = useState(formProject);
  const [shownFor, setShownFor] = useState<string>();
  const [picked, setPicked] = useState<string[]>([]);
  const { busy, error, run } = useAction();
  const store = useMcpServersStore.getState;
  const show = (e?: FormEvent) => {
    e?.preventDefault();
    const projectDir = dir.trim();
    if (!projectDir) return;
    void run(async () => {
      setPicked(await store().projectServers(projectDir, true));
      setShownFor(projectDir);
    });
  };
  useEffect(() => show(), []);
  const save = () =>
    void run(async () => {
      const saved = await store().setProjectServers(shownFor!, picked);
      useAppStore.getState().notify('success', saved.length ? `Runs of this project get ${saved.join(', ')}` : 'Runs of this project get no MCP servers unless you pick them');
    });
  return (
    <section className="panel stack" aria-label="Enabled per project">
      <h2>Enabled per project</h2>
      <p className="muted">The servers a project's runs get unless you pick others: the New run form starts with them ticked, and <code>airlock run</code> uses them when no <code>--mcp</code> is given. A project's own <code>.mcp.json</code> never changes this.</p>
      <form className="row" onSubmit={show} aria-label="Project for MCP servers">
        <label className="row">Project folder <input aria-label="Project folder for MCP servers" value={dir} onChange={(e) => setDir(e.target.value)} spellCheck={false} autoCapitalize="off" placeholder="/path/to/project" /></label>
        <button className="btn" type="submit" disabled={busy || !dir.trim()}>Show</button>
      </form>
      {error && <ErrorBanner message={error} />}
      {shownFor && (
        <>
          <div className="row" role="group" aria-label={`MCP servers enabled for ${shownFor}`}>
            {servers.map((s) => (
              <label key={s.name} className="row" style={{ gap: 4 }}>
                <input type="checkbox" aria-label={`Enable ${s.name} for the project`} checked={picked.includes(s.name)} onChange={(e) => setPicked(e.target.checked ? [...picked, s.name] : picked.filter((n) => n !== s.name))} />
                <span className="mono">{s.name}</span>
              </label>
            ))}
          </div>
          <div className="row">
            <button className="btn primary" disabled={busy} onClick={save}>Save for this project</button>
            <span className="muted mono">{shownFor}</span>
          </div>
        </>
      )}
    </section>
  );
}

/**
 * The user's MCP servers for runs (docs/architecture.md §20): the same registry as `airlock
 * mcp-servers`. A token typed here goes straight to the OS keychain and is never shown again; the
 * sandbox only ever sees the gateway's tools.
 */
export function McpServersScreen() {
  const list = useMcpServersStore((s) => s.servers);
  const loadError = useMcpServersStore((s) => s.error);
  const store = useMcpServersStore.getState;
  const [error, setError] = useState<string>();
  const [removing, setRemoving] = useState<string>();
  const [open, setOpen] = useState<string>();
  const [name, setName] = useState('');
  const [url, setUrl] = useState('');
  const [transport, setTransport] = useState<'http' | 'sse'>('http');
  const [auth, setAuth] = useState<AuthKind>('bearer');
  const [header, setHeader] = useState('');
  const [credential, setCredential] = useState('');
  const { busy, error: formError, run } = useAction();

  const [signingIn, setSigningIn] = useState<string>();
  useEffect(() => void store().load(), []);

  /** Signs in on the host: the browser opens the server's own page; the answer comes when it is done or failed. */
  const signIn = async (server: string) => {
    setSigningIn(server);
    setError(undefined);
    try {
      await store().login(server);
      useAppStore.getState().notify('success', `Signed in to ${server}: its tokens are in the OS keychain`);
      return true;
    } catch (err) {
      setError(`Sign-in to ${server} failed: ${errorMessage(err)}`);
      return false;
    } finally {
      setSigningIn(undefined);
    }
  };

  const submit = (e: FormEvent) => {
    e.preventDefault();
    void run(async () => {
      const added = await store().add({
        name: name.trim(),
        url: url.trim(),
        transport,
        auth: auth === 'header' ? { type: 'header', name: header.trim() } : { type: auth },
        ...(auth === 'none' || auth === 'oauth' ? {} : { credential }),
      });
      // The token leaves the page as soon as it is stored.
      setCredential('');
      setName('');
      setUrl('');
      const n = useAppStore.getState().notify;
      if (auth === 'oauth') {
        // Signed in right away; its tools are listed and pinned once it is.
        if (await signIn(added.server.name)) await store().pin(added.server.name).catch(() => undefined);
      } else if (added.pinError) n('error', `${added.server.name} added, but its tools could not be listed now (${added.pinError}); every tool asks until you pin them`);
      else n('success', `${added.server.name} added: ${added.tools.length} tools pinned; each asks before its call until you allow it`);
      setOpen(added.server.name);
    });
  };
  const remove = async (server: string) => {
    setRemoving(undefined);
    try {
      await store().remove(server);
      if (open === server) setOpen(undefined);
    } catch (err) {
      setError(errorMessage(err));
    }
  };
  const importProposal = (p: ProposedMcpServerView) => {
    setName(p.name.toLowerCase().replace(/[^a-z0-9-]/g, '-').replace(/^[^a-z]+/, '').slice(0, 24));
    // A URL shown with a hidden query cannot be imported as is: the user types the endpoint.
    setUrl(p.url && !p.url.includes(' (') ? p.url : '');
    setTransport(p.transport === 'sse' ? 'sse' : 'http');
    setAuth(p.secretNames.length ? 'bearer' : 'none');
    document.getElementById('mcp-add-name')?.focus();
  };
  const selected = list?.find((s) => s.name === open);

  return (
    <>
      <h1>MCP servers</h1>
      <p className="muted">
        Your MCP servers for runs: Airlock connects to them on this machine with their tokens from the OS keychain, and the agent reaches their tools through the run's gateway (<code>airlock run --mcp NAME</code>). The sandbox never sees a token.
      </p>
      <ErrorBanner message={error ?? loadError} />
      <section className="panel" aria-label="Your MCP servers">
        {list === undefined ? (
          <div className="muted">Loading…</div>
        ) : list.length === 0 ? (
          <div className="muted">No MCP servers yet. Add one below (or with <code>airlock mcp-servers add NAME --url URL</code>, the token on stdin).</div>
        ) : (
          <div className="scroll-x">
            <table>
              <thead><tr><th>Name</th><th>Endpoint</th><th>Credential</th><th>Rules</th><th /></tr></thead>
              <tbody>
                {list.map((s) => (
                  <tr key={s.name} data-mcp-server={s.name}>
                    <td className="mono">{s.name}</td>
                    <td className="mono">{s.transport === 'stdio' ? s.command : s.url} <span className="muted">({s.transport === 'http' ? 'Streamable HTTP' : s.transport === 'sse' ? 'SSE' : 'local, in its own sidecar'})</span></td>
                    <td>{authText(s)}{s.auth.type !== 'none' && s.auth.type !== 'oauth' && !s.hasCredential && <span className="del-n"> token missing from the keychain</span>}</td>
                    <td>
                      {Object.keys(s.policy).length ? Object.entries(s.policy).map(([t, r]) => `${t === '*' ? 'others' : t}: ${r}`).join(', ') : 'none: every tool asks'}
                      <div className="muted">{s.pinnedTools ? `${s.pinnedTools} tools pinned` : 'tools not pinned yet'}</div>
                    </td>
                    <td>
                      {removing === s.name ? (
                        <ConfirmInline
                          label={`Confirm remove MCP server ${s.name}`}
                          question={`Remove "${s.name}"? Its token is deleted from the keychain; runs that name it will not start.`}
                          confirm="Remove"
                          cancel="Keep"
                          onConfirm={() => void remove(s.name)}
                          onCancel={() => setRemoving(undefined)}
                        />
                      ) : (
                        <div className="row">
                          {s.auth.type === 'oauth' && (
                            <button className="btn small" disabled={signingIn !== undefined} onClick={() => void signIn(s.name)} aria-label={`Sign in to ${s.name}`}>
                              {signingIn === s.name ? 'Waiting for the browser…' : s.hasCredential ? 'Sign in again' : 'Sign in'}
                            </button>
                          )}
                          <button className="btn small" onClick={() => setOpen(open === s.name ? undefined : s.name)} aria-expanded={open === s.name} aria-label={`Tools of ${s.name}`}>Tools</button>
                          <button className="btn small danger" onClick={() => setRemoving(s.name)} aria-label={`Remove MCP server ${s.name}`}>Remove</button>
                        </div>
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </section>
      {selected && <ServerTools key={selected.name} server={selected} />}
      {list && list.length > 0 && <ProjectServers servers={list} />}
      <section className="panel stack" aria-label="Add an MCP server">
        <h2>Add an MCP server</h2>
        <form className="stack" onSubmit={submit} aria-label="Add MCP server">
          <label className="row">Name <input id="mcp-add-name" aria-label="Server name" value={name} onChange={(e) => setName(e.target.value)} placeholder="linear" spellCheck={false} autoCapitalize="off" maxLength={24} /></label>
          <label className="row">Endpoint <input aria-label="Server URL" value={url} onChange={(e) => setUrl(e.target.value)} placeholder="https://mcp.example.com/mcp" spellCheck={false} autoCapitalize="off" /></label>
          <label className="row">Transport
            <select aria-label="Transport" value={transport} onChange={(e) => setTransport(e.target.value as 'http' | 'sse')}>
              <option value="http">Streamable HTTP</option>
              <option value="sse">SSE (older servers)</option>
            </select>
          </label>
          <div className="row" role="radiogroup" aria-label="Credential">
            {(['bearer', 'header', 'oauth', 'none'] as const).map((k) => (
              <label key={k} className="row" style={{ gap: 4 }}>
                <input type="radio" name="mcp-auth" value={k} checked={auth === k} onChange={() => setAuth(k)} />
                {k === 'bearer' ? 'Bearer token' : k === 'header' ? 'Token in a header' : k === 'oauth' ? 'Sign in (OAuth, in your browser)' : 'None'}
              </label>
            ))}
          </div>
          {auth === 'header' && <label className="row">Header name <input aria-label="Header name" value={header} onChange={(e) => setHeader(e.target.value)} placeholder="X-API-Key" spellCheck={false} autoCapitalize="off" /></label>}
          {auth !== 'none' && auth !== 'oauth' && <label className="row">Token <input aria-label="Server token" type="password" autoComplete="off" value={credential} onChange={(e) => setCredential(e.target.value)} /></label>}
          <span className="muted" style={{ fontSize: 13 }}>
            {auth === 'oauth'
              ? "Airlock opens the server's own sign-in page in your browser; the tokens go to the OS keychain and are refreshed there."
              : 'The token goes to the OS keychain and is never shown again.'}
          </span>
          <div className="row">
            <button className="btn primary" type="submit" disabled={busy || !name.trim() || !url.trim() || (auth !== 'none' && auth !== 'oauth' && credential.length === 0) || (auth === 'header' && !header.trim())}>{busy ? 'Connecting…' : auth === 'oauth' ? 'Add and sign in' : 'Add and list its tools'}</button>
            {formError && <span className="del-n" role="alert">{formError}</span>}
          </div>
        </form>
      </section>
      <Proposals onImport={importProposal} />
    </>
  );
}
