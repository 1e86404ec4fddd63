import { useEffect, useRef, useState } from 'react';
import { errorInfo } from '../api';
import { useRecordsStore } from '../stores/records-store';
import { useFolderLookup } from '../hooks/use-folder-lookup';
import { useNewRunForm } from '../stores/new-run-form-store';

/** The project's environments as the core found them, for the folder typed (debounced like the exclusions preview). */
function useProjectEnvironments(projectDir: string, environment: string | undefined) {
  const { value, error } = useFolderLookup(projectDir, (dir) => useRecordsStore.getState().findEnvironments(dir, environment), environment ?? '');
  return { found: value, error };
}

/**
 * The New run form's environment (docs/architecture.md §16, "Choosing"): the one found for the
 * project (or the settings default), every other one it has to switch to — with several named
 * devcontainers the user picks — and what the chosen one does not apply.
 */
export function EnvironmentField({ defaultEnvironment }: { defaultEnvironment?: string }) {
  const projectDir = useNewRunForm((s) => s.draft.projectDir);
  const picked = useNewRunForm((s) => s.draft.environment);
  const trust = useNewRunForm((s) => s.draft.trustEnvironment ?? false);
  const set = useNewRunForm((s) => s.set);
  // Another folder: what was picked for the last one does not carry over.
  const lastDir = useRef(projectDir);
  useEffect(() => {
    if (lastDir.current === projectDir) return;
    lastDir.current = projectDir;
    set({ environment: undefined, trustEnvironment: false });
  }, [projectDir, set]);
  const { found, error } = useProjectEnvironments(projectDir, picked ?? defaultEnvironment);
  if (!projectDir.trim()) return <div className="muted" id="r-environment">Choose a project folder to see its environment.</div>;
  if (error) return <div className="del-n" id="r-environment">{error.message}</div>;
  if (!found) return <div className="muted" id="r-environment">Looking for the project&apos;s environment…</div>;
  const selected = picked ?? found.selected;
  const option = found.options.find((o) => o.choice === selected);
  return (
    <div className="stack" style={{ gap: 4 }}>
      <div className="row">
        <select id="r-environment" value={selected} onChange={(e) => set({ environment: e.target.value, trustEnvironment: false })} aria-invalid={!selected ? true : undefined}>
          {!selected && <option value="" disabled>choose one…</option>}
          {found.options.map((o) => <option key={o.choice} value={o.choice}>{o.label}{o.trust === 'untrusted' ? ' (not accepted yet)' : o.trust === 'changed' ? ' (changed since accepted)' : ''}</option>)}
        </select>
        {picked === undefined && selected && <span className="muted" data-testid="environment-found">{found.options.length > 1 ? 'found in the project' : 'the project has no devcontainer'}</span>}
      </div>
      {found.needsChoice && !picked && <div className="hint" role="status" data-testid="environment-needs-choice">{found.needsChoice.replace(/, e\.g\. --environment .*$/, '')}: pick one above.</div>}
      {option?.problem && <div className="del-n" role="alert">{option.problem}</div>}
      {picked === undefined && option?.kind === 'devcontainer' && option.trust && option.trust !== 'trusted' && !trust && (
        <div className="banner warn" role="status" data-testid="environment-fallback">
          Not {option.trust === 'changed' ? 'accepted since it changed' : 'accepted yet'}: this run will use Airlock&apos;s own image, not {option.label.replace(/^devcontainer: /, '')}. Tick the box below to build and use it.
        </div>
      )}
      {option && option.trust && option.trust !== 'trusted' && (
        <label className="row hint">
          <input type="checkbox" checked={trust} onChange={(e) => set({ trustEnvironment: e.target.checked })} />
          Build and run {option.label.replace(/^devcontainer: /, '')}: its Dockerfile, build folder and setup commands are the project&apos;s own code, and building runs it with the engine&apos;s network{option.trust === 'changed' ? ' (changed since you accepted it)' : ''}.
        </label>
      )}
      {option && option.kind !== 'airlock' && <EnvironmentPlanView projectDir={projectDir} environment={selected} />}
      {option && option.notApplied.length > 0 && (
        <div className="muted" data-testid="environment-not-applied">
          Not applied (it would weaken the sandbox):
          <ul>{option.notApplied.map((n) => <li key={n.field}><span className="mono">{n.field}</span>: {n.reason}</li>)}</ul>
        </div>
      )}
    </div>
  );
}

/**
 * What the chosen environment would build and run, read on the host (`airlock env plan`): the image or
 * build, features, each setup command with its user and folder. Read when opened, and again when the
 * choice changes while open, so accepting a devcontainer is judged on what it does.
 */
function EnvironmentPlanView({ projectDir, environment }: { projectDir: string; environment: string }) {
  const [open, setOpen] = useState(false);
  const [plan, setPlan] = useState<{ for: string; text?: string; error?: string }>();
  const key = `${projectDir}\0${environment}`;
  useEffect(() => {
    if (!open || plan?.for === key) return;
    let live = true;
    useRecordsStore.getState().environmentPlan(projectDir, environment).then(
      (text) => live && setPlan({ for: key, text }),
      (e: unknown) => live && setPlan({ for: key, error: errorInfo(e).message }),
    );
    return () => {
      live = false;
    };
  }, [open, key, plan?.for, projectDir, environment]);
  const current = plan?.for === key ? plan : undefined;
  return (
    <details className="environment-plan" onToggle={(e) => setOpen(e.currentTarget.open)}>
      <summary>What it will build and run</summary>
      {!current ? <div className="muted">Reading the plan…</div> : current.error ? <div className="del-n" role="alert">{current.error}</div> : <pre className="mono" aria-label="Environment plan">{current.text}</pre>}
    </details>
  );
}
