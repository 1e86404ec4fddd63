import { create } from 'zustand';
import type { DoctorReport, ImageBuildProgress } from '../../../contracts';
import { api, errorMessage } from '../api';

interface DoctorState {
  report?: DoctorReport;
  checking: boolean;
  building: boolean;
  progress?: ImageBuildProgress;
  error?: string;
  check(): Promise<void>;
  buildImage(): Promise<void>;
  onProgress(p: ImageBuildProgress): void;
}

/** Readiness checks and the image build (first run). */
export const useDoctorStore = create<DoctorState>()((set, get) => ({
  checking: false,
  building: false,
  async check() {
    set({ checking: true, error: undefined });
    try {
      set({ report: await api().call('sandboxes:doctor', {}) });
    } catch (err) {
      set({ error: errorMessage(err) });
    } finally {
      set({ checking: false });
    }
  },
  async buildImage() {
    set({ building: true, error: undefined, progress: { buildId: '', phase: 'check', message: 'starting', fraction: 0 } });
    try {
      await api().call('sandboxes:buildImage', {});
      await get().check();
    } catch (err) {
      set({ error: errorMessage(err) });
    } finally {
      set({ building: false });
    }
  },
  onProgress: (progress) => set({ progress }),
}));
