import { describe, expect, it } from 'vitest';
import type { Route } from '../stores/app-store';
import { bindRouteToAddress, routeFromFragment, routeToFragment, type AddressBar } from './route-address';

const RUN = 'r-mabc12-0123abcd';
const GROUP = 'g-mabc12-0123abcd';

/** A history as a browser keeps one: entries, a position, popstate on back/forward only. */
function fakeBar(hash = '') {
  const entries = [hash];
  let at = 0;
  const listeners = new Set<() => void>();
  const bar: AddressBar & { back(): void; forward(): void; entries: string[] } = {
    entries,
    location: { get hash() { return entries[at]!; } } as Pick<Location, 'hash'>,
    history: {
      pushState: (_d: unknown, _t: string, url?: string | URL | null) => { entries.splice(at + 1, Infinity, String(url)); at++; },
      replaceState: (_d: unknown, _t: string, url?: string | URL | null) => { entries[at] = String(url); },
    },
    addEventListener: (_t, l) => listeners.add(l),
    removeEventListener: (_t, l) => listeners.delete(l),
    back() { at = Math.max(0, at - 1); listeners.forEach((l) => l()); },
    forward() { at = Math.min(entries.length - 1, at + 1); listeners.forEach((l) => l()); },
  };
  return bar;
}

function holder(start: Route) {
  let route = start;
  const subs = new Set<(r: Route) => void>();
  return {
    get: () => route,
    set: (r: Route) => { route = r; subs.forEach((s) => s(r)); },
    subscribe: (l: (r: Route) => void) => { subs.add(l); return () => subs.delete(l); },
  };
}

describe('screen addresses', () => {
  it('round-trips every route and refuses malformed addresses', () => {
    const routes: Route[] = [{ name: 'new' }, { name: 'history' }, { name: 'mcp-servers' }, { name: 'run', runId: RUN }, { name: 'review', runId: RUN }, { name: 'review', runId: RUN, checkpoint: 3 }, { name: 'audit', runId: RUN }, { name: 'compare', groupId: GROUP }];
    for (const r of routes) expect(routeFromFragment(`#${routeToFragment(r)}`)).toEqual(r);
    for (const bad of ['', '#', '#/nope', '#/run/../../etc', `#/run/${RUN}/x`, '#/review/r-1/2', `#/review/${RUN}/-1`, `#/compare/${RUN}`, '#/history/x']) expect(routeFromFragment(bad)).toBeNull();
  });

  it('a start address wins, navigation pushes entries, back and forward set the route', () => {
    const bar = fakeBar(`#/review/${RUN}`);
    const h = holder({ name: 'new' });
    const bound = bindRouteToAddress(bar, h);
    expect(bound.restored).toBe(true);
    expect(h.get()).toEqual({ name: 'review', runId: RUN });
    h.set({ name: 'history' });
    h.set({ name: 'run', runId: RUN });
    expect(bar.entries).toEqual([`#/review/${RUN}`, '#/history', `#/run/${RUN}`]);
    bar.back();
    expect(h.get()).toEqual({ name: 'history' });
    bar.back();
    expect(h.get()).toEqual({ name: 'review', runId: RUN });
    bar.forward();
    expect(h.get()).toEqual({ name: 'history' });
    // Going back does not push a new entry: forward history is intact.
    expect(bar.entries).toHaveLength(3);
    bound.dispose();
    h.set({ name: 'keys' });
    expect(bar.entries).toHaveLength(3);
  });

  it('without an address the current screen is written in place, not pushed', () => {
    const bar = fakeBar('');
    const bound = bindRouteToAddress(bar, holder({ name: 'new' }));
    expect(bound.restored).toBe(false);
    expect(bar.entries).toEqual(['#/new']);
  });
});
