import { useEffect, useState, type FormEvent } from 'react';
import { DEFAULT_GIT_HISTORY, newRunDefaults, type ApprovalMode, type GitHistory, type Isolation } from '../../../contracts';
import { errorMessage } from '../api';
import { useRecordsStore } from '../stores/records-store';
import { useExcludedPreview } from '../hooks/use-excluded-preview';
import { useGvisorBlocked, useVmAvailability } from '../hooks/use-isolation-availability';
import { useProviderChoice } from '../hooks/use-provider-choice';
import { useStartRun } from '../hooks/use-start-run';
import { attemptsOf, startBlockedReason, startInputOf } from '../lib/new-run-start';
import { AGENT_OPTIONS, APPROVAL_OPTIONS, gitHistoryOptions, ISOLATION_OPTIONS, NETWORK_OPTIONS } from '../lib/option-labels';
import { AGENT_LABEL } from '../lib/provider-fit';
import { useAppStore } from '../stores/app-store';
import { useKeysStore } from '../stores/keys-store';
import { useNewRunForm } from '../stores/new-run-form-store';
import { useSettingsStore } from '../stores/settings-store';
import { CliLine } from './cli-line';
import { ErrorBanner } from './common';
import { EnvironmentField } from './environment-field';
import { FolderBrowser } from './folder-browser';
import { AttemptsField } from './new-run-attempts';
import { GatewayFields } from './new-run-gateway';
import { McpServersField } from './new-run-mcp';

/** What the form adds after an approval mode's label. */
const APPROVAL_WHY: Record<ApprovalMode, string> = { auto: ' (the sandbox is the boundary)', ask: '' };

/** One line per isolation level: what it stops (docs/architecture.md §2.3). */
const ISOLATION_EXPLAINER: Record<Isolation, string> = {
  container: 'A hardened container on your engine: fast; shares the host kernel.',
  gvisor: "A hardened container under gVisor's user-space kernel: the agent never makes a system call to the host kernel. Needs runsc registered with Docker.",
  vm: 'A micro-VM with its own kernel and no network card: the strongest wall, slower to start.',
};

function lastSegment(dir: string): string {
  return dir.replace(/[\\/]+$/, '').split(/[\\/]/).pop() || dir;
}

/** The project folder: typed, picked (system dialog or the host folder browser), or one of the recent ones. */
function ProjectField({ problem }: { problem?: string }) {
  const projectDir = useNewRunForm((s) => s.draft.projectDir);
  const set = useNewRunForm((s) => s.set);
  const recent = useSettingsStore((s) => s.settings?.recentProjects) ?? [];
  const [browsing, setBrowsing] = useState(false);
  const pick = async () => {
    try {
      const picked = await useRecordsStore.getState().pickFolder(projectDir.trim() || undefined);
      if (!picked.native) setBrowsing(true);
      else if (picked.path) set({ projectDir: picked.path });
    } catch (err) {
      useAppStore.getState().notify('error', errorMessage(err));
    }
  };
  return (
    <div className="stack" style={{ gap: 6 }}>
      <div className="row" style={{ flexWrap: 'nowrap' }}>
        <input id="r-project" type="text" placeholder="/home/you/code/project" value={projectDir} onChange={(e) => set({ projectDir: e.target.value })} required spellCheck={false}
          style={{ flex: 1 }} aria-invalid={problem ? true : undefined} aria-describedby={problem ? 'r-project-problem' : undefined} />
        <button type="button" className="btn" onClick={() => void pick()} aria-expanded={browsing}>Browse…</button>
      </div>
      {problem && <div id="r-project-problem" className="del-n" role="alert">{problem}</div>}
      {browsing && <FolderBrowser start={projectDir.trim()} onCancel={() => setBrowsing(false)} onChoose={(dir) => { set({ projectDir: dir }); setBrowsing(false); }} />}
      {recent.length > 0 && (
        <div className="recent" role="group" aria-label="Recent projects">
          <span className="muted">Recent:</span>
          {recent.map((dir) => (
            <button key={dir} type="button" className="chip" title={dir} aria-pressed={dir === projectDir.trim()} onClick={() => set({ projectDir: dir })}>{lastSegment(dir)}</button>
          ))}
        </div>
      )}
    </div>
  );
}

/**
 * New run: project, task, agent, provider/model, approval, isolation, network (with the gateway's
 * secrets and rules), limits, the check and attempts, and the `airlock run` line for it all. The draft
 * lives in a store (new-run-form-store.ts), so it survives leaving the screen; "Run again" fills it.
 * The logic is in hooks (the provider for the agent, the excluded-files preview, isolation
 * availability, Start) and lib/new-run-start.ts (why Start is blocked, what it sends).
 */
export function NewRunScreen() {
  const providers = useKeysStore((s) => s.providers);
  const settings = useSettingsStore((s) => s.settings);
  const navigate = useAppStore((s) => s.navigate);
  const { draft: d, set, againFrom } = useNewRunForm();
  const gitHistory: GitHistory = d.gitHistory ?? (settings ? newRunDefaults(settings).effectiveGitHistory : DEFAULT_GIT_HISTORY);
  const gitHistoryChoice = gitHistoryOptions(settings?.gitHistory);
  const starting = useStartRun();
  const busy = starting.busy;
  const { preview, error: previewError } = useExcludedPreview(d.projectDir);
  const vm = useVmAvailability();
  const vmBlocked = vm !== undefined && !vm.available;
  const gvisorBlocked = useGvisorBlocked();
  // A folder known not to exist (or not a folder) blocks Start at the field, before a run is made.
  const folderProblem = previewError?.field === 'projectDir' ? previewError.message : undefined;

  useEffect(() => {
    void useKeysStore.getState().load();
  }, []);
  useEffect(() => {
    if (settings) useNewRunForm.getState().seed(settings);
  }, [settings]);
  const { offered, chosen, noneUsable, switched, clearSwitched } = useProviderChoice({ providers, agent: d.agent, provider: d.provider, model: d.model, set });
  const blocked = startBlockedReason(d, { ...(folderProblem ? { folderProblem } : {}), noneUsable, vmBlocked });

  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (!blocked) void starting.start(gitHistory, settings);
  };

  return (
    <form className="stack" onSubmit={submit} aria-label="New run"
      // Ctrl+Enter (⌘+Enter) starts the run from any field of the form, as it says next to Start run.
      onKeyDown={(e) => {
        if (e.key !== 'Enter' || !(e.metaKey || e.ctrlKey)) return;
        e.preventDefault();
        if (!blocked) e.currentTarget.requestSubmit();
      }}>
      <h1>New run</h1>
      {againFrom && (
        <div className="banner info" role="status">
          Filled in from run <span className="mono">{againFrom}</span>: same project, task, agent, model, isolation, network and limits. Change anything, then start.
        </div>
      )}
      <section className="panel grid-form">
        <label htmlFor="r-project">Project folder</label>
        <ProjectField problem={folderProblem} />
        <label htmlFor="r-environment">Environment</label>
        <EnvironmentField {...(settings?.defaultEnvironment ? { defaultEnvironment: settings.defaultEnvironment } : {})} />
        <label htmlFor="r-task">Task</label>
        <textarea id="r-task" placeholder="What should the agent do?" value={d.task} onChange={(e) => set({ task: e.target.value })} required />
        <label htmlFor="r-agent">Agent</label>
        <div className="row">
          <select id="r-agent" value={d.agent} onChange={(e) => { clearSwitched(); set({ agent: AGENT_OPTIONS.parse(e.target.value) }); }}>
            {AGENT_OPTIONS.options.map((o) => <option key={o.value} value={o.value}>{o.label}</option>)}
          </select>
          {d.agent === 'custom' && (
            <input type="text" aria-label="Custom command" placeholder="aider --yes --message-file /task.md" value={d.customCommand} onChange={(e) => set({ customCommand: e.target.value })} style={{ flex: 1 }} />
          )}
        </div>
        <label htmlFor="r-provider">Provider and model</label>
        <div className="row">
          <select id="r-provider" value={d.provider} onChange={(e) => { clearSwitched(); set({ provider: e.target.value }); }} required>
            <option value="" disabled>{offered.length ? 'choose…' : 'none for this agent'}</option>
            {offered.map((p) => (
              <option key={p.id} value={p.id}>{p.label}{p.requiresKey && !p.hasKey ? (p.credential ? ' (not signed in)' : ' (no key)') : ''}</option>
            ))}
          </select>
          <input type="text" aria-label="Model" list="r-models" placeholder="model id" value={d.model} onChange={(e) => set({ model: e.target.value })} required />
          <datalist id="r-models">{chosen?.models.map((m) => <option key={m} value={m} />)}</datalist>
          {chosen && chosen.requiresKey && !chosen.hasKey && <span className="badge warn">add a key first</span>}
        </div>
        {(switched || noneUsable) && (
          <>
            <span />
            <div className="stack" style={{ gap: 4 }}>
              {switched && (
                <div className="hint" role="status" data-testid="provider-switched">
                  {switched.from} serves only {switched.servesOnly ?? 'its own CLI'}
                  {switched.to ? `; switched to ${switched.to} for the ${AGENT_LABEL[d.agent]}.` : '.'}
                </div>
              )}
              {noneUsable && (
                <div className="del-n" role="alert" data-testid="no-provider">
                  No provider with a key serves the {AGENT_LABEL[d.agent]}.{' '}
                  <button type="button" className="btn small" onClick={() => navigate({ name: 'keys' })}>Add a key</button>
                </div>
              )}
            </div>
          </>
        )}
        <label>Commands</label>
        <div className="row" role="radiogroup" aria-label="Approval mode">
          {APPROVAL_OPTIONS.options.map((o) => (
            <label className="row" key={o.value}><input type="radio" name="approval" checked={d.approval === o.value} onChange={() => set({ approval: o.value })} /> {o.label}{APPROVAL_WHY[o.value]}</label>
          ))}
        </div>
        <label htmlFor="r-isolation">Isolation</label>
        <div className="stack" style={{ gap: 4 }}>
          <select id="r-isolation" value={d.isolation} onChange={(e) => set({ isolation: ISOLATION_OPTIONS.parse(e.target.value) })} aria-invalid={vmBlocked && d.isolation === 'vm' ? true : undefined} style={{ alignSelf: 'flex-start' }}>
            {ISOLATION_OPTIONS.options.map((o) => {
              const blocked = (o.value === 'gvisor' && gvisorBlocked) || (o.value === 'vm' && vmBlocked);
              return <option key={o.value} value={o.value} disabled={blocked}>{blocked ? `${o.label} (unavailable)` : o.label}</option>;
            })}
          </select>
          <p className="muted" data-testid="isolation-explainer">{ISOLATION_EXPLAINER[d.isolation]}</p>
          {vmBlocked && (
            // Only an error when chosen: an optional level that is missing is a quiet note, not a warning.
            <div className={d.isolation === 'vm' ? 'del-n' : 'muted'} id="r-vm-why" role={d.isolation === 'vm' ? 'alert' : undefined}>
              Virtual machine isolation is not available here: {vm.reason}.{' '}
              {d.isolation === 'vm' && 'Choose Container, or fix it in '}
              <button type="button" className="btn small" onClick={() => navigate({ name: 'doctor' })}>Setup check</button>
            </div>
          )}
        </div>
        <label htmlFor="r-network">Network</label>
        <div className="stack" style={{ gap: 4 }}>
          <div className="row">
            <select id="r-network" value={d.network} onChange={(e) => set({ network: NETWORK_OPTIONS.parse(e.target.value) })}>
              {NETWORK_OPTIONS.options.map((o) => <option key={o.value} value={o.value}>{o.label}</option>)}
            </select>
            {d.network === 'open' && <span className="badge warn">the agent can reach the internet</span>}
          </div>
          {d.network === 'allowlist' && (
            <>
              <input type="text" aria-label="Allowed domains" aria-describedby="r-allow-help" placeholder="preset:npm github.com *.example.com" value={d.allowlist} onChange={(e) => set({ allowlist: e.target.value })} />
              <div id="r-allow-help" className="hint">
                Domains separated by spaces: <span className="mono">example.com</span> (that name only), <span className="mono">*.example.com</span> (its subdomains),{' '}
                <span className="mono">preset:npm</span>, <span className="mono">preset:pip</span>, <span className="mono">preset:cargo</span>, <span className="mono">preset:go</span>, <span className="mono">preset:apt</span> (a package manager's registries).
              </div>
              <input type="text" aria-label="Internal hosts" title="Allowed hosts that may resolve to private (LAN) addresses: exact names, e.g. a company git server" placeholder="internal hosts (LAN), e.g. git.corp.example.com" value={d.internalHosts ?? ''} onChange={(e) => set({ internalHosts: e.target.value })} />
              <GatewayFields />
            </>
          )}
        </div>
        <McpServersField />
        <label htmlFor="r-timeout">Limits</label>
        <div className="row">
          <input id="r-timeout" type="number" min={1} step="any" style={{ width: 80 }} value={d.timeoutMin} onChange={(e) => set({ timeoutMin: e.target.value })} /> <span className="muted">minutes</span>
          <input type="number" min={1} aria-label="Token budget" placeholder="token budget" style={{ width: 130 }} value={d.budgetTokens} onChange={(e) => set({ budgetTokens: e.target.value })} />
          <input type="number" min={0} step="0.01" aria-label="Cost budget in USD" placeholder="$ budget" style={{ width: 100 }} value={d.budgetUsd} onChange={(e) => set({ budgetUsd: e.target.value })} />
          <span className="hint">A budget is never passed: near the end the model's answers are shortened, then the run stops.</span>
        </div>
        <label htmlFor="r-git-history">Git history</label>
        <div className="row">
          <select id="r-git-history" value={String(gitHistory)} onChange={(e) => set({ gitHistory: gitHistoryChoice.parse(e.target.value) })}>
            {gitHistoryChoice.options.map((o) => <option key={o.value} value={o.value}>{o.label}</option>)}
          </select>
          <span className="muted">files left out of the copy are removed from every commit; older commits may hold secrets</span>
        </div>
        <label htmlFor="r-check">Check</label>
        <div className="stack" style={{ gap: 4 }}>
          <input id="r-check" type="text" className="mono" placeholder="npm test (optional)" value={d.check} onChange={(e) => set({ check: e.target.value })} spellCheck={false} />
          <span className="hint">Run by Airlock in the sandbox after the agent's processes are gone; its exit code, not the agent's word, says whether the result passes.</span>
        </div>
        <label>Attempts</label>
        <AttemptsField providers={providers} />
      </section>
      <section className="panel" aria-label="Excluded files">
        <h2>Left out of the copy</h2>
        {!d.projectDir.trim() && <div className="muted">Choose a project folder to see which files stay out of the sandbox.</div>}
        {previewError && !folderProblem && <div className="del-n">{previewError.message}</div>}
        {d.projectDir.trim() && !preview && !previewError && <div className="muted">Reading the folder…</div>}
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
      <CliLine input={startInputOf(d, gitHistory)} attempts={attemptsOf(d)} />
      <ErrorBanner error={starting.error} />
      {/* Start stays in view at the bottom of the window, however long the form gets. */}
      <div className="row start-bar">
        <button className="btn primary" disabled={busy || !!blocked} aria-describedby={blocked ? 'r-start-why' : undefined}>{busy ? 'Starting…' : 'Start run'}</button>
        <span className="kbd">Ctrl+Enter</span>
        {blocked && !busy && <span id="r-start-why" className="muted" aria-label="Why Start run is disabled">{blocked}</span>}
      </div>
    </form>
  );
}
