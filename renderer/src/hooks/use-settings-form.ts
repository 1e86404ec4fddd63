import { useEffect, useState } from 'react';
import type { EngineCheckResult, ErrorInfo, Settings } from '../../../contracts';
import { api, errorInfo } from '../api';
import { draftOf, followSaved, patchOf, type SettingsDraft } from '../lib/settings-draft';
import { useAppStore } from '../stores/app-store';
import { useNewRunForm } from '../stores/new-run-form-store';
import { useSettingsStore } from '../stores/settings-store';
import { useAction } from './use-action';

/** A field's problem, shown under it. */
export type SettingsProblems = Partial<Record<'engineHost' | 'timeoutMin' | 'gitCommits', string>>;

/** The Settings form: its draft, what Save would send, and the Save and Check connection actions. */
export interface SettingsForm {
  draft: SettingsDraft;
  set(patch: Partial<SettingsDraft>): void;
  /** Sets an engine field: the last connection check and the address's problem no longer apply. */
  setEngineField(patch: Partial<SettingsDraft>): void;
  problems: SettingsProblems;
  /** The draft differs from the saved settings (or has a problem Save would name). */
  dirty: boolean;
  saving: boolean;
  save(): Promise<void>;
  revert(): void;
  checking: boolean;
  check: EngineCheckResult | undefined;
  checkConnection(): Promise<void>;
  /** The error of the last Save or Check connection that is not about one field. */
  error: ErrorInfo | undefined;
}

/**
 * The Settings screen's logic (docs/architecture.md §5, "Settings"): one Save sends only what
 * changed; the core checks the engine address on save and on Check connection, and a bad one marks
 * its field instead of the banner. Settings saved elsewhere flow into the fields not edited here.
 */
export function useSettingsForm(settings: Settings): SettingsForm {
  const notify = useAppStore((s) => s.notify);
  const [draft, setDraft] = useState<SettingsDraft>(() => draftOf(settings));
  const [base, setBase] = useState(settings);
  const [problems, setProblems] = useState<SettingsProblems>({});
  const [check, setCheck] = useState<EngineCheckResult>();
  const saving = useAction();
  const checking = useAction();
  const set = (patch: Partial<SettingsDraft>) => setDraft((prev) => ({ ...prev, ...patch }));

  useEffect(() => {
    if (settings === base) return;
    setDraft((prev) => followSaved(prev, base, settings));
    setBase(settings);
  }, [settings, base]);

  const computed = patchOf(draft, settings);
  /** An error about the engine address marks that field; others go to the banner. */
  const onFieldError = (err: unknown, replace: boolean) => {
    const info = errorInfo(err);
    if (info.field !== 'engineHost') return false;
    setProblems((p) => (replace ? { engineHost: info.message } : { ...p, engineHost: info.message }));
    return true;
  };

  return {
    draft,
    set,
    setEngineField: (patch) => {
      set(patch);
      setCheck(undefined);
      setProblems((p) => ({ ...p, engineHost: undefined }));
    },
    problems,
    dirty: 'patch' in computed ? Object.keys(computed.patch).length > 0 : true,
    saving: saving.busy,
    save: () => saving.run(async () => {
      if ('field' in computed) {
        setProblems({ [computed.field]: computed.problem });
        return;
      }
      setProblems({});
      await useSettingsStore.getState().update(computed.patch);
      const saved = useSettingsStore.getState().settings;
      const defaultsChanged = (['defaultAgent', 'defaultApproval', 'defaultIsolation', 'defaultNetwork', 'defaultTimeoutSec'] as const).some((k) => k in computed.patch);
      // New defaults fill the New run form now, not only in the next window.
      if (saved && defaultsChanged) useNewRunForm.getState().reseed(saved);
      if (saved) {
        setDraft(draftOf(saved));
        setBase(saved);
      }
      notify('success', 'Settings saved');
    }, (err) => onFieldError(err, true)),
    revert: () => {
      setDraft(draftOf(settings));
      setProblems({});
      setCheck(undefined);
      saving.setError(undefined);
      checking.setError(undefined);
    },
    checking: checking.busy,
    check,
    checkConnection: () => checking.run(async () => {
      setCheck(undefined);
      setProblems((p) => ({ ...p, engineHost: undefined }));
      setCheck(await api().call('settings:checkEngine', { engine: draft.engine, engineHost: draft.engineHost.trim(), engineAllowInsecure: draft.engineAllowInsecure }));
    }, (err) => onFieldError(err, false)),
    error: saving.failure ?? checking.failure,
  };
}
