import { create } from 'zustand';
import type { Settings } from '../../../contracts';
import { api } from '../api';

interface SettingsState {
  settings?: Settings;
  load(): Promise<void>;
  update(patch: Partial<Settings>): Promise<void>;
  apply(settings: Settings): void;
}

export const useSettingsStore = create<SettingsState>()((set) => ({
  async load() {
    set({ settings: await api().call('settings:get', {}) });
  },
  async update(patch) {
    set({ settings: await api().call('settings:update', patch) });
  },
  apply: (settings) => set({ settings }),
}));
