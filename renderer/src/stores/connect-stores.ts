import { isFinalStatus, type RunSummary } from '../../../contracts';
import type { Api } from '../api';
import { useAppStore } from './app-store';
import { useDiffStore } from './diff-store';
import { useDoctorStore } from './doctor-store';
import { useKeysStore } from './keys-store';
import { useNetworkStore } from './network-store';
import { useRunsStore } from './runs-store';
import { useSettingsStore } from './settings-store';

/** Shows a desktop notification when allowed and wanted (run finished, approval needed). */
export function desktopNotify(title: string, body: string): void {
  if (useSettingsStore.getState().settings?.notifications === false) return;
  if (typeof Notification === 'undefined' || Notification.permission !== 'granted') return;
  try {
    new Notification(title, { body });
  } catch {
    // Some embedders refuse notifications; the in-app notice is enough.
  }
}

function notifyTransitions(prev: RunSummary | undefined, next: RunSummary): void {
  if (isFinalStatus(next.status) && prev && !isFinalStatus(prev.status)) {
    desktopNotify(`Run ${next.status}`, next.task.slice(0, 120));
    useAppStore.getState().notify(next.status === 'done' ? 'success' : 'info', `Run ${next.status}: ${next.task.slice(0, 80)}`);
  }
  if (next.pendingApproval && prev?.pendingApproval?.requestId !== next.pendingApproval.requestId) {
    desktopNotify('Approval needed', next.pendingApproval.command.slice(0, 200));
  }
}

/** Wires push events into the stores; returns a function that unwires them. */
export function connectStores(api: Api): () => void {
  const pendingInvalidations = new Map<string, ReturnType<typeof setTimeout>>();
  const offs = [
    api.on('runs:onDidChangeStatus', (summary) => {
      const prev = useRunsStore.getState().runs[summary.id];
      useRunsStore.getState().applyStatus(summary);
      notifyTransitions(prev, summary);
      if (isFinalStatus(summary.status)) useNetworkStore.getState().closeRun(summary.id);
    }),
    api.on('runs:onDidEvent', (event) => {
      // Denials the host's egress proxy observed, as typed events (never scraped from terminal text).
      if (event.event.type === 'network_blocked') useNetworkStore.getState().noteBlocked(event.runId, event.event);
      useRunsStore.getState().applyEvent(event);
    }),
    api.on('diffs:onDidChange', ({ runId }) => {
      // Changes come in bursts while an agent edits: refetch at most every 300 ms per run.
      if (pendingInvalidations.has(runId)) return;
      pendingInvalidations.set(runId, setTimeout(() => {
        pendingInvalidations.delete(runId);
        void useDiffStore.getState().invalidate(runId);
      }, 300));
    }),
    api.on('keys:onDidChange', () => void useKeysStore.getState().load()),
    api.on('sandboxes:onDidBuildProgress', (p) => useDoctorStore.getState().onProgress(p)),
    api.on('settings:onDidChange', (s) => useSettingsStore.getState().apply(s)),
    api.onConnectionChange((c, why) => useAppStore.getState().setConnected(c, why)),
  ];
  return () => {
    for (const off of offs) off();
    for (const t of pendingInvalidations.values()) clearTimeout(t);
  };
}
