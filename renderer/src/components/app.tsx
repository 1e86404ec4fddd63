import { useEffect, useMemo, useRef } from 'react';
import { isFinalStatus } from '../../../contracts';
import { useAppStore, type Route } from '../stores/app-store';
import { useRunsStore } from '../stores/runs-store';
import { useDocumentTheme } from '../lib/theme';
import { useSidebarCollapsed } from '../lib/sidebar';
import { AuditView } from './audit-view';
import { CompareScreen } from './compare-screen';
import { DoctorScreen } from './doctor-screen';
import { HistoryScreen } from './history-screen';
import { KeysScreen } from './keys-screen';
import { NewRunScreen } from './new-run-screen';
import { ReviewScreen } from './review-screen';
import { SecretsScreen } from './secrets-screen';
import { McpServersScreen } from './mcp-servers-screen';
import { SettingsScreen } from './settings-screen';
import { RunView } from './run-view';
import { ThemeToggle } from './theme-toggle';
import { McpApplyRequests, McpFolderRequests } from './mcp-panels';
import { NavIcon } from './nav-icons';

/** The screens of the sidebar; a collapsed sidebar shows each one's icon (NavIcon, by route name; else the label's first letter). */
const NAV: Array<{ route: Route; label: string; key: string }> = [
  { route: { name: 'new' }, label: 'New run', key: '1' },
  { route: { name: 'history' }, label: 'History', key: '2' },
  { route: { name: 'keys' }, label: 'Keys & providers', key: '3' },
  { route: { name: 'doctor' }, label: 'Setup check', key: '4' },
  { route: { name: 'settings' }, label: 'Settings', key: '5' },
  { route: { name: 'secrets' }, label: 'Secrets', key: '6' },
  { route: { name: 'mcp-servers' }, label: 'MCP servers', key: '7' },
];
/** Alt+0 collapses or expands the sidebar (the toggle button is also the first stop of Tab). */
const TOGGLE_KEY = '0';

function Screen({ route }: { route: Route }) {
  switch (route.name) {
    case 'doctor': return <DoctorScreen />;
    case 'keys': return <KeysScreen />;
    case 'secrets': return <SecretsScreen />;
    case 'mcp-servers': return <McpServersScreen />;
    case 'new': return <NewRunScreen />;
    case 'history': return <HistoryScreen />;
    case 'settings': return <SettingsScreen />;
    case 'run': return <RunView runId={route.runId} />;
    case 'review': return <ReviewScreen key={`${route.runId}#${route.checkpoint ?? ''}`} runId={route.runId} {...(route.checkpoint !== undefined ? { checkpoint: route.checkpoint } : {})} />;
    case 'audit': return <AuditView runId={route.runId} />;
    case 'compare': return <CompareScreen groupId={route.groupId} />;
  }
}

/** The shell of the UI: sidebar (screens, live runs), the current screen, notices. */
export function App() {
  const { route, navigate, connected, disconnectedWhy, booting, notices, dismiss } = useAppStore();
  const runs = useRunsStore((s) => s.runs);
  const order = useRunsStore((s) => s.order);
  const activeRuns = useMemo(() => order.map((id) => runs[id]).filter((r) => r && !isFinalStatus(r.status)), [runs, order]);

  const [collapsed, toggleSidebar] = useSidebarCollapsed();

  useDocumentTheme();
  useEffect(() => {
    // Alt+1…5 switch screens from anywhere, also while typing; Alt+0 folds the sidebar.
    const onKey = (e: KeyboardEvent) => {
      if (!e.altKey || e.ctrlKey || e.metaKey) return;
      if (e.key === TOGGLE_KEY) {
        e.preventDefault();
        toggleSidebar();
        return;
      }
      const item = NAV.find((n) => n.key === e.key);
      if (item) {
        e.preventDefault();
        navigate(item.route);
      }
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [navigate, toggleSidebar]);

  // Another screen starts at its top, not at the last screen's scroll position.
  const mainRef = useRef<HTMLElement>(null);
  const screenKey = JSON.stringify(route);
  useEffect(() => {
    if (mainRef.current) mainRef.current.scrollTop = 0;
  }, [screenKey]);

  return (
    <div className={`app${collapsed ? ' collapsed' : ''}`}>
      <nav className="sidebar" aria-label="Main">
        <div className="brand">
          <span className="brand-mark" aria-hidden /><span className="nav-label">Airlock</span>
          <button className="sidebar-toggle" aria-expanded={!collapsed} aria-label={collapsed ? 'Expand sidebar' : 'Collapse sidebar'} title={`${collapsed ? 'Expand' : 'Collapse'} the sidebar (Alt+${TOGGLE_KEY})`} onClick={toggleSidebar}>
            <span aria-hidden>{collapsed ? '»' : '«'}</span>
          </button>
        </div>
        {NAV.map((n) => (
          <button key={n.route.name} className="nav-item" aria-current={route.name === n.route.name ? 'page' : undefined} onClick={() => navigate(n.route)} title={collapsed ? `${n.label} (Alt+${n.key})` : undefined}>
            <span className="nav-icon" aria-hidden><NavIcon name={n.route.name} fallback={n.label.slice(0, 1)} /></span><span className="nav-label">{n.label}</span><span className="kbd nav-label">Alt+{n.key}</span>
          </button>
        ))}
        {activeRuns.length > 0 && <div className="nav-section nav-label">Running</div>}
        {activeRuns.map((r) => r && (
          <button key={r.id} className="nav-item" aria-current={route.name === 'run' && route.runId === r.id ? 'page' : undefined} onClick={() => navigate({ name: 'run', runId: r.id })} title={r.task}>
            <span className="nav-icon" aria-hidden>{r.pendingApproval ? '?' : <NavIcon name="run" fallback="▶" />}</span>
            <span className="nav-label" style={{ overflow: 'hidden', textOverflow: 'ellipsis', whiteSpace: 'nowrap' }}>{r.task}</span>
            <span className="kbd nav-label">{r.pendingApproval ? 'approve?' : r.status}</span>
          </button>
        ))}
        <div style={{ flex: 1 }} />
        {!connected && !disconnectedWhy && <div className="badge fail" role="status">disconnected — retrying</div>}
        <ThemeToggle />
      </nav>
      <main className="main" ref={mainRef}>
        {!connected && disconnectedWhy && <div className="banner error" role="alert" aria-label="Connection lost">{disconnectedWhy}</div>}
        <McpFolderRequests />
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
