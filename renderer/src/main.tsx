import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { createApi, setApi } from './api';
import { App } from './components/app';
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

// First run: send the user to the setup check when something is missing, to keys when no key is set.
void (async () => {
  await Promise.allSettled([useSettingsStore.getState().load(), useKeysStore.getState().load(), useRunsStore.getState().load()]);
  await useDoctorStore.getState().check();
  const report = useDoctorStore.getState().report;
  const { providers } = useKeysStore.getState();
  if (useAppStore.getState().route.name !== 'new') return;
  if (report && !report.ready) useAppStore.getState().navigate({ name: 'doctor' });
  else if (providers.length && !providers.some((p) => p.hasKey || !p.requiresKey)) useAppStore.getState().navigate({ name: 'keys' });
})();

createRoot(document.getElementById('root') as HTMLElement).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
