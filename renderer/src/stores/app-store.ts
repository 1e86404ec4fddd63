import { create } from 'zustand';
import { api } from '../api';

export type Route =
  | { name: 'doctor' }
  | { name: 'keys' }
  | { name: 'secrets' }
  | { name: 'mcp-servers' }
  | { name: 'new' }
  | { name: 'run'; runId: string }
  | { name: 'review'; runId: string; checkpoint?: number }
  | { name: 'audit'; runId: string }
  | { name: 'compare'; groupId: string }
  | { name: 'history' }
  | { name: 'settings' };

export interface Notice {
  id: number;
  tone: 'info' | 'error' | 'success';
  text: string;
}

interface AppState {
  route: Route;
  connected: boolean;
  /** Until the first screen is chosen (keys loaded): nothing is drawn in the main area yet. */
  booting: boolean;
  setBooted(): void;
  /** While disconnected: what to do when retrying will not help (an Airlock restarted with a new address). */
  disconnectedWhy?: string;
  notices: Notice[];
  navigate(route: Route): void;
  setConnected(connected: boolean, why?: string): void;
  notify(tone: Notice['tone'], text: string): void;
  dismiss(id: number): void;
}

let noticeId = 0;

/** Navigation, connection state and transient notices. */
export const useAppStore = create<AppState>()((set) => ({
  route: { name: 'new' },
  connected: true,
  booting: true,
  setBooted: () => set({ booting: false }),
  notices: [],
  navigate: (route) => set({ route }),
  setConnected: (connected, why) => set({ connected, disconnectedWhy: connected ? undefined : why }),
  notify: (tone, text) => {
    const id = ++noticeId;
    set((s) => ({ notices: [...s.notices.slice(-4), { id, tone, text }] }));
    setTimeout(() => set((s) => ({ notices: s.notices.filter((n) => n.id !== id) })), tone === 'error' ? 10_000 : 5_000);
  },
  dismiss: (id) => set((s) => ({ notices: s.notices.filter((n) => n.id !== id) })),
}));

/** Whether this page is the desktop app's window (IPC) rather than the browser UI (native dialogs, not downloads). */
export function isDesktopApp(): boolean {
  return api().transportKind === 'ipc';
}
