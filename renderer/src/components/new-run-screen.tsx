import { useEffect, useState, type FormEvent } from 'react';
import type { AgentKind, ApprovalMode, ErrorInfo, ExcludedPreview, Isolation, NetworkPolicy } from '../../../contracts';
import { api, errorInfo } from '../api';
import { useAppStore } from '../stores/app-store';
import { useKeysStore } from '../stores/keys-store';
import { useRunsStore } from '../stores/runs-store';
import { useSettingsStore } from '../stores/settings-store';
import { ErrorBanner } from './common';

function useExcludedPreview(projectDir: string) {
  const [preview, setPreview] = useState<ExcludedPreview>();
  const [error, setError] = useState<ErrorInfo>();
  useEffect(() => {
    const dir = projectDir.trim();
    if (!dir) {
      setPreview(undefined);
      setError(undefined);
      return;
    }
    let stale = false;
    const t = setTimeout(() => {
      api().call('runs:previewExcluded', { projectDir: dir }).then(
        (p) => { if (!stale) { setPreview(p); setError(undefined); } },
        (err) => { if (!stale) { setPreview(undefined); setError(errorInfo(err)); } },
      );
    }, 400);
    return () => { stale = true; clearTimeout(t); };
  }, [projectDir]);
  return { preview, error };
}

/** One line per isolation level: what it stops (docs/architecture.md §2.3). */
const ISOLATION_EXPLAINER: Record<Isolation, string> = {
  container: 'A hardened container on your engine: fast; shares the host kernel.',
  gvisor: "A hardened container under gVisor's user-space kernel: the agent never makes a system call to the host kernel. Needs runsc registered with Docker.",
  vm: 'A micro-VM with its own kernel and no network card: the strongest wall, slower to start.',
};

/** New run: project, task, agent, provider/model, approval, isolation, network, limits. */
export function NewRunScreen() {
  const providers = useKeysStore((s) => s.providers);
  const settings = useSettingsStore((s) => s.settings);
  const start = useRunsStore((s) => s.start);
  const navigate = useAppStore((s) => s.navigate);
  const [projectDir, setProjectDir] = useState('');
  const [task, setTask] = useState('');
  const [agent, setAgent] = useState<AgentKind>(settings?.defaultAgent ?? 'builtin');
  const [customCommand, setCustomCommand] = useState('');
  const [provider, setProvider] = useState(settings?.defaultProvider ?? '');
  const [model, setModel] = useState(settings?.defaultModel ?? '');
  const [approval, setApproval] = useState<ApprovalMode>(settings?.defaultApproval ?? 'auto');
  const [isolation, setIsolation] = useState<Isolation>(settings?.defaultIsolation ?? 'container');
  const [network, setNetwork] = useState<NetworkPolicy>(settings?.defaultNetwork ?? 'none');
  const [allowlist, setAllowlist] = useState('');
  const [timeoutMin, setTimeoutMin] = useState(String(Math.round((settings?.defaultTimeoutSec ?? 1800) / 60)));
  const [budgetTokens, setBudgetTokens] = useState('');
  const [budgetUsd, setBudgetUsd] = useState('');
  const [error, setError] = useState<ErrorInfo>();
  const [busy, setBusy] = useState(false);
  const { preview, error: previewError } = useExcludedPreview(projectDir);
  // A folder known not to exist (or not a folder) blocks Start at the field, before a run is made.
  const folderProblem = previewError?.field === 'projectDir' ? previewError.message : undefined;

  useEffect(() => {
    void useKeysStore.getState().load();
  }, []);
  useEffect(() => {
    // Default to the first provider that can be used (has a key or needs none).
    if (!provider && providers.length) {
      const usable = providers.find((p) => p.hasKey || !p.requiresKey) ?? providers[0];
      if (usable) {
        setProvider(usable.id);
        if (!model && usable.models[0]) setModel(usable.models[0]);
      }
    }
  }, [providers, provider, model]);
  const chosen = providers.find((p) => p.id === provider);

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      if (typeof Notification !== 'undefined' && Notification.permission === 'default') void Notification.requestPermission().catch(() => {});
      const run = await start({
        projectDir: projectDir.trim(),
        task,
        agent,
        customCommand: agent === 'custom' ? customCommand : undefined,
        provider,
        model: model.trim(),
        approval,
        isolation,
        network,
        allowlist: network === 'allowlist' ? allowlist.split(/[\s,]+/).filter(Boolean) : undefined,
        limits: {
          timeoutSec: Math.max(10, Math.round(Number(timeoutMin || '30') * 60)),
          budgetTokens: budgetTokens ? Number(budgetTokens) : undefined,
          budgetUsd: budgetUsd ? Number(budgetUsd) : undefined,
        },
      });
      navigate({ name: 'run', runId: run.id });
    } catch (err) {
      setError(errorInfo(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <form className="stack" onSubmit={submit} aria-label="New run">
      <h1>New run</h1>
      <section className="panel grid-form">
        <label htmlFor="r-project">Project folder</label>
        <div className="stack" style={{ gap: 4 }}>
          <input id="r-project" type="text" placeholder="/home/you/code/project" value={projectDir} onChange={(e) => setProjectDir(e.target.value)} required spellCheck={false}
            aria-invalid={folderProblem ? true : undefined} aria-describedby={folderProblem ? 'r-project-problem' : undefined} />
          {folderProblem && <div id="r-project-problem" className="del-n" role="alert">{folderProblem}</div>}
        </div>
        <label htmlFor="r-task">Task</label>
        <textarea id="r-task" placeholder="What should the agent do?" value={task} onChange={(e) => setTask(e.target.value)} required
          onKeyDown={(e) => { if (e.key === 'Enter' && (e.metaKey || e.ctrlKey)) e.currentTarget.form?.requestSubmit(); }} />
        <label htmlFor="r-agent">Agent</label>
        <div className="row">
          <select id="r-agent" value={agent} onChange={(e) => setAgent(e.target.value as AgentKind)}>
            <option value="builtin">Built-in agent</option>
            <option value="claude-code">Claude Code</option>
            <option value="codex">Codex CLI</option>
            <option value="custom">Custom command</option>
          </select>
          {agent === 'custom' && (
            <input type="text" aria-label="Custom command" placeholder="aider --yes --message-file /task.md" value={customCommand} onChange={(e) => setCustomCommand(e.target.value)} style={{ flex: 1 }} />
          )}
        </div>
        <label htmlFor="r-provider">Provider and model</label>
        <div className="row">
          <select id="r-provider" value={provider} onChange={(e) => setProvider(e.target.value)} required>
            <option value="" disabled>choose…</option>
            {providers.map((p) => (
              <option key={p.id} value={p.id}>{p.label}{p.requiresKey && !p.hasKey ? ' (no key)' : ''}</option>
            ))}
          </select>
          <input type="text" aria-label="Model" list="r-models" placeholder="model id" value={model} onChange={(e) => setModel(e.target.value)} required />
          <datalist id="r-models">{chosen?.models.map((m) => <option key={m} value={m} />)}</datalist>
          {chosen && chosen.requiresKey && !chosen.hasKey && <span className="badge warn">add a key first</span>}
        </div>
        <label>Commands</label>
        <div className="row" role="radiogroup" aria-label="Approval mode">
          <label className="row"><input type="radio" name="approval" checked={approval === 'auto'} onChange={() => setApproval('auto')} /> Run freely (the sandbox is the boundary)</label>
          <label className="row"><input type="radio" name="approval" checked={approval === 'ask'} onChange={() => setApproval('ask')} /> Ask before each command</label>
        </div>
        <label htmlFor="r-isolation">Isolation</label>
        <div className="row">
          <select id="r-isolation" value={isolation} onChange={(e) => setIsolation(e.target.value as Isolation)}>
            <option value="container">Container</option>
            <option value="gvisor">gVisor container</option>
            <option value="vm">Virtual machine</option>
          </select>
          <select aria-label="Network" value={network} onChange={(e) => setNetwork(e.target.value as NetworkPolicy)}>
            <option value="none">No network (model only)</option>
            <option value="allowlist">Allow-listed domains</option>
            <option value="open">Open internet</option>
          </select>
          {network === 'allowlist' && <input type="text" aria-label="Allowed domains" placeholder="preset:npm preset:pip example.com" value={allowlist} onChange={(e) => setAllowlist(e.target.value)} />}
          {network === 'open' && <span className="badge warn">the agent can reach the internet</span>}
        </div>
        <span />
        <p className="muted" data-testid="isolation-explainer">{ISOLATION_EXPLAINER[isolation]}</p>
        <label htmlFor="r-timeout">Limits</label>
        <div className="row">
          <input id="r-timeout" type="number" min={1} style={{ width: 80 }} value={timeoutMin} onChange={(e) => setTimeoutMin(e.target.value)} /> <span className="muted">minutes</span>
          <input type="number" min={1} aria-label="Token budget" placeholder="token budget" style={{ width: 130 }} value={budgetTokens} onChange={(e) => setBudgetTokens(e.target.value)} />
          <input type="number" min={0} step="0.01" aria-label="Cost budget in USD" placeholder="$ budget" style={{ width: 100 }} value={budgetUsd} onChange={(e) => setBudgetUsd(e.target.value)} />
        </div>
      </section>
      <section className="panel" aria-label="Excluded files">
        <h2>Left out of the copy</h2>
        {!projectDir.trim() && <div className="muted">Choose a project folder to see which files stay out of the sandbox.</div>}
        {previewError && !folderProblem && <div className="del-n">{previewError.message}</div>}
        {preview && (
          <>
            <div className="muted">
              {preview.includedFiles} files will be copied{preview.isGitRepo ? '' : ' (not a git repository)'}; {preview.excluded.length === 0 ? 'nothing is excluded.' : `${preview.excluded.length} excluded:`}
            </div>
            {preview.excluded.length > 0 && (
              <table><tbody>{preview.excluded.map((f) => <tr key={f.path}><td className="mono">{f.path}</td><td className="muted">{f.reason}</td></tr>)}</tbody></table>
            )}
          </>
        )}
      </section>
      <ErrorBanner error={error} />
      <div className="row">
        <button className="btn primary" disabled={busy || !!folderProblem || !projectDir.trim() || !task.trim() || !provider || !model.trim()}>{busy ? 'Starting…' : 'Start run'}</button>
        <span className="kbd">Ctrl+Enter</span>
      </div>
    </form>
  );
}
