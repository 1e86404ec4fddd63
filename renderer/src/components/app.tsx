import { useEffect, useMemo } from 'react';
import { isFinalStatus } from '../../../contracts';
import { useAppStore, type Route } from '../stores/app-store';
import { useRunsStore } from '../stores/runs-store';
import { useDocumentTheme } from '../lib/theme';
import { AuditView } from './audit-view';
import { DoctorScreen } from './doctor-screen';
import { HistoryScreen } from './history-screen';
import { KeysScreen } from './keys-screen';
import { NewRunScreen } from './new-run-screen';
import { ReviewScreen } from './review-screen';
import { SecretsScreen } from './secrets-screen';
import { SettingsScreen } from './settings-screen';
import { RunView } from './run-view';
import { ThemeToggle } from './theme-toggle';
import { McpApplyRequests } from './mcp-panels';

const NAV: Array<{ route: Route; label: string; key: string }> = [
  { route: { name: 'new' }, label: 'New run', key: '1' },
  { route: { name: 'history' }, label: 'History', key: '2' },
  { route: { name: 'keys' }, label: 'Keys & providers', key: '3' },
  { route: { name: 'doctor' }, label: 'Setup check', key: '4' },
  { route: { name: 'settings' }, label: 'Settings', key: '5' },
  { route: { name: 'secrets' }, label: 'Secrets', key: '6' },
];

function Screen({ route }: { route: Route }) {
  switch (route.name) {
    case 'doctor': return <DoctorScreen />;
    case 'keys': return <KeysScreen />;
    case 'secrets': return <SecretsScreen />;
    case 'new': return <NewRunScreen />;
    case 'history': return <HistoryScreen />;
    case 'settings': return <SettingsScreen />;
    case 'run': return <RunView runId={route.runId} />;
    case 'review': return <ReviewScreen runId={route.runId} />;
    case 'audit': return <AuditView runId={route.runId} />;
  }
}

/** The shell of the UI: sidebar (screens, live runs), the current screen, notices. */
export function App() {
  const { route, navigate, connected, disconnectedWhy, booting, notices, dismiss } = useAppStore();
  const runs = useRunsStore((s) => s.runs);
  const order = useRunsStore((s) => s.order);
  const activeRuns = useMemo(() => order.map((id) => runs[id]).filter((r) => r && !isFinalStatus(r.status)), [runs, order]);

  useDocumentTheme();
  useEffect(() => {
    // Alt+1…5 switch screens from anywhere, also while typing.
    const onKey = (e: KeyboardEvent) => {
      if (!e.altKey || e.ctrlKey || e.metaKey) return;
      const item = NAV.find((n) => n.key === e.key);
      if (item) {
        e.preventDefault();
        navigate(item.route);
      }
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [navigate]);

  return (
    <div className="app">
      <nav className="sidebar" aria-label="Main">
        <div className="brand"><span className="brand-mark" aria-hidden />Airlock</div>
        {NAV.map((n) => (
          <button key={n.route.name} className="nav-item" aria-current={route.name === n.route.name ? 'page' : undefined} onClick={() => navigate(n.route)}>
            <span>{n.label}</span><span className="kbd">Alt+{n.key}</span>
          </button>
        ))}
        {activeRuns.length > 0 && <div className="nav-section">Running</div>}
        {activeRuns.map((r) => r && (
          <button key={r.id} className="nav-item" aria-current={route.name === 'run' && route.runId === r.id ? 'page' : undefined} onClick={() => navigate({ name: 'run', runId: r.id })} title={r.task}>
            <span style={{ overflow: 'hidden', textOverflow: 'ellipsis', whiteSpace: 'nowrap' }}>{r.task}</span>
            <span className="kbd">{r.pendingApproval ? 'approve?' : r.status}</span>
          </button>
        ))}
        <div style={{ flex: 1 }} />
        {!connected && !disconnectedWhy && <div className="badge fail" role="status">disconnected — retrying</div>}
        <ThemeToggle />
      </nav>
      <main className="main">
        {!connected && disconnectedWhy && <div className="banner error" role="alert" aria-label="Connection lost">{disconnectedWhy}</div>}
        <McpApplyRequests />
        {booting ? <div className="empty" aria-busy="true">Loading…</div> : <Screen route={route} />}
      </main>
      <div className="notice-area" aria-live="polite">
        {notices.map((n) => (
          <div key={n.id} className={`notice ${n.tone}`} role={n.tone === 'error' ? 'alert' : 'status'} onClick={() => dismiss(n.id)}>{n.text}</div>
        ))}
      </div>
    </div>
  );
}
