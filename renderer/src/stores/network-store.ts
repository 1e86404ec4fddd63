import { create } from 'zustand';
import type { NetworkAllowScope, PreviewPort } from '../../../contracts';
import { api } from '../api';

/** A connection the run's egress proxy denied, as announced in the run terminal. */
export interface BlockedHost {
  host: string;
  port: number;
  method: string;
}

/** Blocked hosts kept per run: the latest few are what the user wants to allow. */
export const MAX_BLOCKED_PER_RUN = 20;
/** Terminal text kept between chunks so a notice split across two chunks is still found. */
const TAIL_CHARS = 512;

// Written by the run service: `[airlock] blocked CONNECT host:443: reason` (coloured).
const BLOCKED_LINE = /\[airlock\] blocked (\S+) (\S+):(\d+):/g;
// eslint-disable-next-line no-control-regex -- terminal colour codes are exactly what we strip
const ANSI = /\x1b\[[0-9;]*m/g;

interface NetworkState {
  /** Ports published for a live run, in the order they were published. */
  ports: Record<string, PreviewPort[]>;
  /** Hosts denied while the run view was connected, newest last, without duplicates. */
  blocked: Record<string, BlockedHost[]>;
  tails: Record<string, string>;
  publish(runId: string, port: number): Promise<PreviewPort>;
  allow(runId: string, host: string, port: number | undefined, scope: NetworkAllowScope): Promise<void>;
  /** Scans run-terminal output for the proxy's "blocked" notices. */
  noteTerminalData(runId: string, data: string): void;
  /** Forgets a run's published ports (they close when the run ends). */
  closeRun(runId: string): void;
}

export const useNetworkStore = create<NetworkState>()((set, get) => ({
  ports: {},
  blocked: {},
  tails: {},
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
  noteTerminalData(runId, data) {
    const tail = get().tails[runId] ?? '';
    const text = tail + data.replace(ANSI, '');
    const found: BlockedHost[] = [];
    for (const m of text.matchAll(BLOCKED_LINE)) {
      // A notice wholly inside the kept tail was counted with the previous chunk.
      if ((m.index ?? 0) + m[0].length <= tail.length) continue;
      found.push({ method: m[1] as string, host: m[2] as string, port: Number(m[3]) });
    }
    set((s) => {
      const next: Partial<NetworkState> = { tails: { ...s.tails, [runId]: text.slice(-TAIL_CHARS) } };
      if (found.length) {
        let list = s.blocked[runId] ?? [];
        for (const b of found) list = [...list.filter((x) => x.host !== b.host || x.port !== b.port), b];
        next.blocked = { ...s.blocked, [runId]: list.slice(-MAX_BLOCKED_PER_RUN) };
      }
      return next;
    });
  },
  closeRun(runId) {
    set((s) => {
      if (!s.ports[runId] && !s.tails[runId]) return s;
      const { [runId]: _p, ...ports } = s.ports;
      const { [runId]: _t, ...tails } = s.tails;
      return { ports, tails };
    });
  },
}));
