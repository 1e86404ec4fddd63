import { create } from 'zustand';
import type { NetworkAllowScope, NetworkBlockedEvent, PreviewPort } from '../../../contracts';
import { api } from '../api';

/** A connection the run's egress proxy denied (a typed `network_blocked` run event from the host). */
export interface BlockedHost {
  host: string;
  port: number;
  method: string;
}

/** Blocked hosts kept per run: the latest few are what the user wants to allow. */
export const MAX_BLOCKED_PER_RUN = 20;

interface NetworkState {
  /** Ports published for a live run, in the order they were published. */
  ports: Record<string, PreviewPort[]>;
  /** Hosts denied while the run view was connected, newest last, without duplicates. */
  blocked: Record<string, BlockedHost[]>;
  publish(runId: string, port: number): Promise<PreviewPort>;
  allow(runId: string, host: string, port: number | undefined, scope: NetworkAllowScope): Promise<void>;
  /**
   * Records a denial the host's egress proxy observed. Only typed events reach here: terminal text
   * is written by the sandbox too, so a printed "blocked" line is never offered for Allow.
   */
  noteBlocked(runId: string, event: NetworkBlockedEvent): void;
  /** Forgets a run's published ports (they close when the run ends). */
  closeRun(runId: string): void;
}

export const useNetworkStore = create<NetworkState>()((set) => ({
  ports: {},
  blocked: {},
  async publish(runId, port) {
    const published = await api().call('runs:publishPort', { runId, port });
    set((s) => {
      const others = (s.ports[runId] ?? []).filter((p) => p.sandboxPort !== published.sandboxPort);
      return { ports: { ...s.ports, [runId]: [...others, published] } };
    });
    return published;
  },
  async allow(runId, host, port, scope) {
    await api().call('runs:allowNetwork', { runId, host, scope, ...(port !== undefined ? { port } : {}) });
    // Allowed hosts leave the "recently blocked" list; a new denial brings them back.
    set((s) => ({ blocked: { ...s.blocked, [runId]: (s.blocked[runId] ?? []).filter((b) => b.host !== host || (port !== undefined && b.port !== port)) } }));
  },
  noteBlocked(runId, event) {
    const b: BlockedHost = { method: event.method, host: event.host, port: event.port };
    set((s) => {
      const list = [...(s.blocked[runId] ?? []).filter((x) => x.host !== b.host || x.port !== b.port), b];
      return { blocked: { ...s.blocked, [runId]: list.slice(-MAX_BLOCKED_PER_RUN) } };
    });
  },
  closeRun(runId) {
    set((s) => {
      if (!s.ports[runId]) return s;
      const { [runId]: _p, ...ports } = s.ports;
      return { ports };
    });
  },
}));
