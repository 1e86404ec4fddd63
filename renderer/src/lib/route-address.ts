/**
 * Every screen has an address (docs/architecture.md §5, "Screens and addresses"): the route lives in the
 * page's fragment (`#/review/r-…/2`), so a reload returns to the same screen, Back and Forward move
 * between screens inside the app, and a run or a review can be linked. The fragment never leaves the
 * page (no request, no Electron navigation: `will-navigate` is not raised for in-page changes), and the
 * query string (the browser UI's token) is kept as it is.
 */
import { AttemptGroupId, RunId } from '../../../contracts';
import type { Route } from '../stores/app-store';

const PLAIN = ['new', 'history', 'keys', 'doctor', 'settings', 'secrets', 'mcp-servers'] as const;
type PlainName = (typeof PLAIN)[number];

/** The fragment for a route, without the leading `#`. */
export function routeToFragment(route: Route): string {
  switch (route.name) {
    case 'run':
    case 'audit':
      return `/${route.name}/${route.runId}`;
    case 'review':
      return `/review/${route.runId}${route.checkpoint !== undefined ? `/${route.checkpoint}` : ''}`;
    case 'compare':
      return `/compare/${route.groupId}`;
    default:
      return `/${route.name}`;
  }
}

/**
 * The route a fragment names, or null for anything else (an address typed or pasted by hand is input:
 * ids must be well-formed, a checkpoint a small whole number).
 */
export function routeFromFragment(fragment: string): Route | null {
  const parts = fragment.replace(/^#/, '').split('/');
  if (parts[0] !== '' || parts.length < 2) return null;
  const [, name, id, extra, ...rest] = parts;
  if (rest.length) return null;
  if (id === undefined) return (PLAIN as readonly string[]).includes(name!) ? { name: name as PlainName } : null;
  if (name === 'compare') return extra === undefined && AttemptGroupId.safeParse(id).success ? { name: 'compare', groupId: id } : null;
  if (!RunId.safeParse(id).success) return null;
  if (name === 'run' || name === 'audit') return extra === undefined ? { name, runId: id } : null;
  if (name !== 'review') return null;
  if (extra === undefined) return { name: 'review', runId: id };
  return /^\d{1,6}$/.test(extra) ? { name: 'review', runId: id, checkpoint: Number(extra) } : null;
}

export function sameRoute(a: Route, b: Route): boolean {
  return routeToFragment(a) === routeToFragment(b);
}

/** What the binding needs of the page: its location and history (a test passes jsdom's). */
export interface AddressBar {
  location: Pick<Location, 'hash'>;
  history: Pick<History, 'pushState' | 'replaceState'>;
  addEventListener(type: 'popstate', listener: () => void): void;
  removeEventListener(type: 'popstate', listener: () => void): void;
}

/** The store side of the binding: the current route, a way to set it, and a way to watch it. */
export interface RouteHolder {
  get(): Route;
  set(route: Route): void;
  subscribe(listener: (route: Route) => void): () => void;
}

/**
 * Keeps the store's route and the address in step: an address present at start wins (reload, a link),
 * each navigation inside the app is a history entry, and Back/Forward set the route from the address.
 * Returns whether the start address named a screen, and a disposer.
 */
export function bindRouteToAddress(bar: AddressBar, holder: RouteHolder): { restored: boolean; dispose: () => void } {
  const initial = routeFromFragment(bar.location.hash);
  if (initial) holder.set(initial);
  else bar.history.replaceState(null, '', `#${routeToFragment(holder.get())}`);
  let applying = false;
  const onPop = () => {
    const route = routeFromFragment(bar.location.hash);
    if (!route || sameRoute(route, holder.get())) return;
    applying = true;
    try {
      holder.set(route);
    } finally {
      applying = false;
    }
  };
  bar.addEventListener('popstate', onPop);
  const unsubscribe = holder.subscribe((route) => {
    if (applying) return;
    const current = routeFromFragment(bar.location.hash);
    if (current && sameRoute(current, route)) return;
    bar.history.pushState(null, '', `#${routeToFragment(route)}`);
  });
  return {
    restored: initial !== null,
    dispose: () => {
      unsubscribe();
      bar.removeEventListener('popstate', onPop);
    },
  };
}
