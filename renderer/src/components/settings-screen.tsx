import { useEffect, useId, useState, type ReactNode } from 'react';
import type { EngineCheckResult, Settings } from '../../../contracts';
import { useAppOverrides } from '../hooks/use-app-overrides';
import { useSettingsForm } from '../hooks/use-settings-form';
import { useSettingsStore } from '../stores/settings-store';
import { AGENT_OPTIONS, APPROVAL_OPTIONS, ENGINE_OPTIONS, GIT_MODE_OPTIONS, ISOLATION_OPTIONS, NETWORK_OPTIONS, THEME_OPTIONS, VM_ACCEL_OPTIONS } from '../lib/option-labels';
import { ErrorBanner } from './common';
import { McpSettingsPanel } from './mcp-panels';
import { PreparedEnvironmentsPanel } from './prepared-environments-panel';

/**
 * Settings (docs/architecture.md §5, "Settings"): every preference the app keeps, each with one line
 * on what it does and when it takes effect. One Save for the screen; the core checks the engine
 * address on save (a bad one marks its field and nothing is saved). The form's logic is
 * hooks/use-settings-form.ts; its draft and what Save sends, lib/settings-draft.ts.
 */

const NEXT_SANDBOX = 'Takes effect: from the next sandbox; runs in progress keep the engine they started on.';

/** One setting: its label, the control, a line on what it does and when it takes effect. */
function SettingRow({ id, label, hint, when, children }: { id: string; label: string; hint: string; when: string; children: ReactNode }) {
  return (
    <>
      <label htmlFor={id}>{label}</label>
      <div className="setting">
        {children}
        <p className="hint" id={`${id}-hint`}>{hint} <span className="when">{when}</span></p>
      </div>
    </>
  );
}

/** What Check connection found, in words: the engine, local or remote, or the error and its fix. */
function EngineCheckView({ result }: { result: EngineCheckResult }) {
  const { check, engine } = result;
  if (check.status === 'ok' && engine) {
    return (
      <div className="engine-check ok" role="status" data-testid="engine-check">
        <span className="badge ok">connected</span>{' '}
        <span className="badge">{engine.remote ? 'remote' : 'local'}</span>{' '}
        {/* "Docker 28.2 over SSH at build-box": name, version and where, as the setup check says it. */}
        <b>{engine.summary}</b> <span className="muted">API {engine.apiVersion}</span>
        {engine.remote && <div className="hint">Remote: the project copy and the run token go to that machine; provider keys stay on this one.</div>}
      </div>
    );
  }
  return (
    <div className="engine-check fail" role="alert" data-testid="engine-check">
      <span className={`badge ${check.status}`}>{check.status === 'fail' ? 'no connection' : check.status}</span> {check.detail}
      {check.fix && <div className="fix">What to do: {check.fix}</div>}
    </div>
  );
}

/** The risk of an insecure engine, asked before the switch is turned on. */
function InsecureConfirm({ onAllow, onCancel }: { onAllow: () => void; onCancel: () => void }) {
  const title = useId();
  return (
    <div className="banner confirm" role="alertdialog" aria-labelledby={title}>
      <b id={title}>Allow insecure engine connections?</b>
      <ul>
        <li>A plain <span className="mono">tcp://</span> engine is the Docker API without encryption or a password: anyone on the network who reaches its port can run containers as root on that machine.</li>
        <li>The project copy and the run token cross the network in clear text; TLS without certificate checks lets anyone in between read them.</li>
      </ul>
      Prefer <span className="mono">ssh://user@host</span> or TLS with DOCKER_TLS_VERIFY. Provider keys never go to the engine either way.
      <div className="row" style={{ marginTop: 8 }}>
        <button type="button" className="btn danger" onClick={onAllow}>Allow insecure engines</button>
        <button type="button" className="btn" onClick={onCancel} autoFocus>Keep them refused</button>
      </div>
    </div>
  );
}

export function SettingsScreen() {
  const settings = useSettingsStore((s) => s.settings);
  useEffect(() => {
    if (!settings) void useSettingsStore.getState().load();
  }, [settings]);
  if (!settings) return <div className="muted">Loading settings…</div>;
  return (
    <>
      <SettingsForm settings={settings} />
      <McpSettingsPanel />
    </>
  );
}

function SettingsForm({ settings }: { settings: Settings }) {
  const form = useSettingsForm(settings);
  const { draft: d, set, setEngineField, problems, dirty } = form;
  const busy = form.saving;
  const [confirmInsecure, setConfirmInsecure] = useState(false);
  const overrides = useAppOverrides();

  const engineOverride = overrides.filter((o) => o.startsWith('AIRLOCK_ENGINE'));
  const engineWhen = engineOverride.length ? `Not in this session: ${engineOverride.join(', ')} (from --engine-host/--engine) wins until Airlock starts without it.` : NEXT_SANDBOX;
  const hostProblem = problems.engineHost;

  return (
    <form className="stack settings-screen" onSubmit={(e) => { e.preventDefault(); void form.save(); }} aria-label="Settings" noValidate>
      <div className="row spread">
        <h1>Settings</h1>
        <div className="row">
          <button type="button" className="btn" disabled={!dirty || busy} onClick={form.revert}>Revert</button>
          <button className="btn primary" disabled={!dirty || busy}>{busy ? 'Saving…' : 'Save settings'}</button>
        </div>
      </div>
      <ErrorBanner error={form.error} />

      <section className="panel" aria-labelledby="s-engine-title">
        <h2 id="s-engine-title">Container engine</h2>
        <div className="grid-form">
          <SettingRow id="s-engine" label="Engine" hint="Auto takes DOCKER_HOST, CONTAINER_HOST, the Docker context, then the first Docker or Podman socket found; Docker or Podman looks only for that one." when={engineWhen}>
            <select id="s-engine" value={d.engine} onChange={(e) => setEngineField({ engine: ENGINE_OPTIONS.parse(e.target.value) })} aria-describedby="s-engine-hint">
              {ENGINE_OPTIONS.options.map((o) => <option key={o.value} value={o.value}>{o.label}</option>)}
            </select>
          </SettingRow>
          <SettingRow id="s-engine-host" label="Engine address" hint="Empty: found as above. ssh://user@host uses your ssh keys and config; tcp://host:2376 needs TLS (DOCKER_TLS_VERIFY); or a Docker context's name." when={engineWhen}>
            <div className="row" style={{ flexWrap: 'nowrap' }}>
              <input id="s-engine-host" type="text" spellCheck={false} style={{ flex: 1 }} placeholder="unix:///var/run/docker.sock, ssh://me@build-box, tcp://build-box:2376 or a context" value={d.engineHost}
                onChange={(e) => setEngineField({ engineHost: e.target.value })} aria-invalid={hostProblem ? true : undefined} aria-describedby={hostProblem ? 's-engine-host-problem' : 's-engine-host-hint'} />
              <button type="button" className="btn" onClick={() => void form.checkConnection()} disabled={form.checking}>{form.checking ? 'Checking…' : 'Check connection'}</button>
            </div>
            {hostProblem && <div id="s-engine-host-problem" className="del-n field-problem" role="alert">{hostProblem}</div>}
            {form.check && <EngineCheckView result={form.check} />}
          </SettingRow>
          <SettingRow id="s-engine-insecure" label="Insecure engines" hint="Off: plain tcp:// to another machine, and TLS without certificate checks, are refused with the reason." when={engineWhen}>
            <label className="row check-label">
              <input id="s-engine-insecure" type="checkbox" checked={d.engineAllowInsecure} onChange={(e) => (e.target.checked ? setConfirmInsecure(true) : setEngineField({ engineAllowInsecure: false }))} />
              Allow unencrypted or unverified engine connections
            </label>
            {d.engineAllowInsecure && <span className="badge warn">insecure engines allowed</span>}
            {confirmInsecure && <InsecureConfirm onAllow={() => { setEngineField({ engineAllowInsecure: true }); setConfirmInsecure(false); }} onCancel={() => setConfirmInsecure(false)} />}
          </SettingRow>
        </div>
      </section>

      <section className="panel" aria-labelledby="s-defaults-title">
        <h2 id="s-defaults-title">New run defaults</h2>
        <div className="grid-form">
          <SettingRow id="s-agent" label="Agent" hint="The agent the New run form starts with." when="Takes effect: in the New run form, once saved.">
            <select id="s-agent" value={d.defaultAgent} onChange={(e) => set({ defaultAgent: AGENT_OPTIONS.parse(e.target.value) })}>
              {AGENT_OPTIONS.options.map((o) => <option key={o.value} value={o.value}>{o.label}</option>)}
            </select>
          </SettingRow>
          <SettingRow id="s-approval" label="Commands" hint="Run freely (the sandbox is the boundary) or ask before each command." when="Takes effect: in the New run form, once saved.">
            <select id="s-approval" value={d.defaultApproval} onChange={(e) => set({ defaultApproval: APPROVAL_OPTIONS.parse(e.target.value) })}>
              {APPROVAL_OPTIONS.options.map((o) => <option key={o.value} value={o.value}>{o.label}</option>)}
            </select>
          </SettingRow>
          <SettingRow id="s-isolation" label="Isolation" hint="Container is fastest; gVisor keeps the agent off the host kernel; a virtual machine is the strongest wall." when="Takes effect: in the New run form, once saved.">
            <select id="s-isolation" value={d.defaultIsolation} onChange={(e) => set({ defaultIsolation: ISOLATION_OPTIONS.parse(e.target.value) })}>
              {ISOLATION_OPTIONS.options.map((o) => <option key={o.value} value={o.value}>{o.label}</option>)}
            </select>
          </SettingRow>
          <SettingRow id="s-network" label="Network" hint="What the sandbox may reach besides the model: nothing, allow-listed domains, or the internet." when="Takes effect: in the New run form, once saved.">
            <select id="s-network" value={d.defaultNetwork} onChange={(e) => set({ defaultNetwork: NETWORK_OPTIONS.parse(e.target.value) })}>
              {NETWORK_OPTIONS.options.map((o) => <option key={o.value} value={o.value}>{o.label}</option>)}
            </select>
          </SettingRow>
          <SettingRow id="s-timeout" label="Time limit" hint="A run is stopped and its sandbox wiped after this long." when="Takes effect: in the New run form, once saved.">
            <div className="row">
              <input id="s-timeout" type="number" min={1} step={1} style={{ width: 90 }} value={d.timeoutMin} onChange={(e) => set({ timeoutMin: e.target.value })} aria-invalid={problems.timeoutMin ? true : undefined} />
              <span className="muted">minutes</span>
            </div>
            {problems.timeoutMin && <div className="del-n field-problem" role="alert">{problems.timeoutMin}</div>}
          </SettingRow>
          <SettingRow id="s-git" label="Git history" hint="How much of the project's history the sandbox's repository holds; older commits may hold secrets." when="Takes effect: from the next run.">
            <div className="row">
              <select id="s-git" value={d.gitMode} onChange={(e) => set({ gitMode: GIT_MODE_OPTIONS.parse(e.target.value) })}>
                {GIT_MODE_OPTIONS.options.map((o) => <option key={o.value} value={o.value}>{o.label}</option>)}
              </select>
              {d.gitMode === 'commits' && (
                <>
                  <input type="number" min={1} step={1} aria-label="Number of commits" style={{ width: 90 }} value={d.gitCommits} onChange={(e) => set({ gitCommits: e.target.value })} aria-invalid={problems.gitCommits ? true : undefined} />
                  <span className="muted">commits</span>
                </>
              )}
            </div>
            {problems.gitCommits && <div className="del-n field-problem" role="alert">{problems.gitCommits}</div>}
          </SettingRow>
        </div>
      </section>

      <PreparedEnvironmentsPanel />

      <section className="panel" aria-labelledby="s-vm-title">
        <h2 id="s-vm-title">Virtual machines</h2>
        <div className="grid-form">
          <SettingRow id="s-vm-accel" label="VM accelerator" hint="Auto tries KVM (Linux) or HVF (macOS) once and falls back to TCG, software emulation: slow but works everywhere."
            when={overrides.includes('AIRLOCK_VM_ACCEL') ? 'Not in this session: AIRLOCK_VM_ACCEL wins until Airlock starts without it.' : 'Takes effect: from the next virtual machine; running ones keep theirs.'}>
            <select id="s-vm-accel" value={d.vmAccel} onChange={(e) => set({ vmAccel: VM_ACCEL_OPTIONS.parse(e.target.value) })}>
              {VM_ACCEL_OPTIONS.options.map((o) => <option key={o.value} value={o.value}>{o.label}</option>)}
            </select>
          </SettingRow>
        </div>
      </section>

      <section className="panel" aria-labelledby="s-app-title">
        <h2 id="s-app-title">App and privacy</h2>
        <div className="grid-form">
          <SettingRow id="s-theme" label="Theme" hint="Light, dark, or follow the system." when="Takes effect: once saved.">
            <select id="s-theme" value={d.theme} onChange={(e) => set({ theme: THEME_OPTIONS.parse(e.target.value) })}>
              {THEME_OPTIONS.options.map((o) => <option key={o.value} value={o.value}>{o.label}</option>)}
            </select>
          </SettingRow>
          <SettingRow id="s-notifications" label="Notifications" hint="A desktop notification when a run ends or asks for approval." when="Takes effect: once saved.">
            <label className="row check-label"><input id="s-notifications" type="checkbox" checked={d.notifications} onChange={(e) => set({ notifications: e.target.checked })} /> Notify me</label>
          </SettingRow>
          <SettingRow id="s-transcripts" label="Transcripts" hint="Keep prompts and model answers in each run's log on this machine (off by default)." when="Takes effect: from the next model call.">
            <label className="row check-label"><input id="s-transcripts" type="checkbox" checked={d.transcripts} onChange={(e) => set({ transcripts: e.target.checked })} /> Keep transcripts</label>
          </SettingRow>
          <SettingRow id="s-mcp-http" label="MCP over HTTP" hint="Lets host agents reach Airlock's MCP door at an address on 127.0.0.1 with a token, besides the stdio command below (off by default)." when="Takes effect: once saved; the door stays open while the app runs.">
            <label className="row check-label"><input id="s-mcp-http" type="checkbox" checked={d.mcpHttp} onChange={(e) => set({ mcpHttp: e.target.checked })} /> Serve MCP over HTTP on 127.0.0.1 (token required)</label>
          </SettingRow>
        </div>
      </section>
    </form>
  );
}
