import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { createApi, setApi } from './api';
import { App } from './components/app';
import { bindRouteToAddress } from './lib/route-address';
import { useAppStore } from './stores/app-store';
import { connectStores } from './stores/connect-stores';
import { useDoctorStore } from './stores/doctor-store';
import { useKeysStore } from './stores/keys-store';
import { useRunsStore } from './stores/runs-store';
import { useSettingsStore } from './stores/settings-store';
import { TerminalHub, setTerminalHub } from './terminal/terminal-hub';
import { selectTransport } from './transport/select-transport';
import './styles.css';

const api = createApi(selectTransport());
setApi(api);
setTerminalHub(new TerminalHub(api));
connectStores(api);

// The screen lives in the address: a reload or a link opens the screen it names (lib/route-address.ts).
const address = bindRouteToAddress(window, {
  get: () => useAppStore.getState().route,
  set: (route) => useAppStore.getState().navigate(route),
  subscribe: (listener) => useAppStore.subscribe((s, prev) => {
    if (s.route !== prev.route) listener(s.route);
  }),
});

// First run: keys first when none is set (decided before anything is drawn, so New run never flashes
// first), then the setup check when something is missing. An address that named a screen is kept.
void (async () => {
  await Promise.allSettled([useSettingsStore.getState().load(), useKeysStore.getState().load(), useRunsStore.getState().load()]);
  const { providers } = useKeysStore.getState();
  const app = useAppStore.getState();
  const first = !address.restored && app.route.name === 'new' && providers.length && !providers.some((p) => p.hasKey || !p.requiresKey) ? 'keys' : app.route.name;
  if (first !== app.route.name) app.navigate({ name: 'keys' });
  app.setBooted();
  await useDoctorStore.getState().check();
  const report = useDoctorStore.getState().report;
  if (address.restored || useAppStore.getState().route.name !== first) return;
  if (report && !report.ready) useAppStore.getState().navigate({ name: 'doctor' });
})();

createRoot(document.getElementById('root') as HTMLElement).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
