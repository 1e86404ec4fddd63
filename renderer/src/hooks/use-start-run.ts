import type { ErrorInfo, GitHistory, Settings } from '../../../contracts';
import { api } from '../api';
import { attemptsOf, startInputOf } from '../lib/new-run-start';
import { useAppStore } from '../stores/app-store';
import { useNewRunForm } from '../stores/new-run-form-store';
import { useRunsStore } from '../stores/runs-store';
import { useAction } from './use-action';

/** Start run: busy while the core prepares the run, the host's typed error if it refuses. */
export interface StartRun {
  busy: boolean;
  error: ErrorInfo | undefined;
  start(gitHistory: GitHistory, settings: Settings | undefined): Promise<void>;
}

/**
 * Starts the New run form's draft and opens the run (or, with two or more attempts, the group's
 * comparison); the draft then keeps project and settings for
 * the next run, but not the task, and the network policy goes back to the default
 * (new-run-form-store.ts `started`).
 */
export function useStartRun(): StartRun {
  const action = useAction();
  return {
    busy: action.busy,
    error: action.failure,
    start: (gitHistory, settings) => action.run(async () => {
      if (typeof Notification !== 'undefined' && Notification.permission === 'default') void Notification.requestPermission().catch(() => {});
      const draft = useNewRunForm.getState().draft;
      const attempts = attemptsOf(draft);
      if (attempts) {
        // Agents × models: one group, compared side by side (docs/architecture.md §18).
        const group = await api().call('attempts:start', { run: startInputOf(draft, gitHistory), attempts });
        useNewRunForm.getState().started(settings);
        useAppStore.getState().navigate({ name: 'compare', groupId: group.id });
        return;
      }
      const run = await useRunsStore.getState().start(startInputOf(draft, gitHistory));
      useNewRunForm.getState().started(settings);
      useAppStore.getState().navigate({ name: 'run', runId: run.id });
    }),
  };
}
