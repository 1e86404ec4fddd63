import { useEffect, useRef, useState, type WheelEvent } from 'react';
import { runTerminalId } from '../../../contracts';
import { errorMessage } from '../api';
import { useAction } from '../hooks/use-action';
import { useAppStore } from '../stores/app-store';
import { useShellsStore } from '../stores/shells-store';
import { TerminalView } from './terminal-view';

const NO_TABS: never[] = [];

/** The size of the terminal on screen, so a new shell's PTY starts at the size it will be shown at. */
function visibleTerminalSize(panel: HTMLElement | null): { cols: number; rows: number } | undefined {
  const el = panel?.querySelector<HTMLElement>('.terminal-view:not([hidden]) .terminal-host');
  const cols = Number(el?.dataset.cols);
  const rows = Number(el?.dataset.rows);
  return cols >= 2 && rows >= 2 ? { cols, rows } : undefined;
}

/**
 * A run's terminals as tabs: the run's own terminal, then "Shell 1, Shell 2, …" (each its own PTY
 * in the sandbox) and "+" while the sandbox lives. Every tab stays mounted, so switching keeps its
 * screen, scrollback and search.
 */
export function TerminalPanel({ runId, live }: { runId: string; live: boolean }) {
  const shells = useShellsStore((s) => s.byRun[runId]);
  const tabs = shells?.tabs ?? NO_TABS;
  const [selected, setSelected] = useState<string>(runTerminalId(runId));
  // Opening a shell: busy while it opens; its error is the notice under the tabs.
  const { busy: opening, error: notice, setError: setNotice, run } = useAction();
  // Bumped on every tab click, so a click on the tab already shown still hands its shell the keyboard.
  const [focusTick, setFocusTick] = useState(0);
  const panel = useRef<HTMLDivElement>(null);
  const runTerminal = runTerminalId(runId);
  const current = selected === runTerminal || tabs.some((t) => t.terminalId === selected) ? selected : runTerminal;

  useEffect(() => {
    setSelected(runTerminalId(runId));
    setNotice(undefined);
  }, [runId, setNotice]);
  useEffect(() => {
    // The tab strip scrolls sideways when many shells are open: keep the chosen tab in view.
    panel.current?.querySelector(`[data-terminal-id="${current}"]`)?.scrollIntoView?.({ block: 'nearest', inline: 'nearest' });
  }, [current]);

  const openShell = () => run(async () => {
    const tab = await useShellsStore.getState().open(runId, visibleTerminalSize(panel.current));
    setSelected(tab.terminalId);
  });

  // A vertical wheel scrolls the tab strip sideways, as in editors.
  const scrollTabs = (e: WheelEvent<HTMLDivElement>) => {
    if (e.deltaY && !e.deltaX) e.currentTarget.scrollLeft += e.deltaY;
  };

  const show = (terminalId: string) => {
    setSelected(terminalId);
    setFocusTick((n) => n + 1);
  };

  const closeShell = (terminalId: string) => {
    const at = tabs.findIndex((t) => t.terminalId === terminalId);
    if (terminalId === current) setSelected(tabs[at + 1]?.terminalId ?? tabs[at - 1]?.terminalId ?? runTerminal);
    setNotice(undefined);
    useShellsStore.getState().close(runId, terminalId).catch((err) => useAppStore.getState().notify('error', errorMessage(err)));
  };

  return (
    <div className="terminal-panel" ref={panel}>
      <div className="terminal-tabs">
        <div className="tabs" role="tablist" aria-label="Terminals" onWheel={scrollTabs}>
          <button className="tab" role="tab" aria-selected={current === runTerminal} onClick={() => show(runTerminal)}>Terminal</button>
          {tabs.map((t) => (
            <span key={t.terminalId} className="tab-with-close" data-terminal-id={t.terminalId}>
              <button className="tab" role="tab" aria-selected={current === t.terminalId} onClick={() => show(t.terminalId)} title={t.exited ? `${t.label} (exited)` : t.label}>
                {t.label}{t.exited && <span className="muted"> (exited)</span>}
              </button>
              <button className="tab-close" aria-label={`Close ${t.label}`} title={`Close ${t.label}${t.exited ? '' : ' (ends its shell)'}`} onClick={() => closeShell(t.terminalId)}>×</button>
            </span>
          ))}
        </div>
        {live && (
          <button className="tab tab-new" aria-label="New shell" title="Open a shell in the sandbox" disabled={opening} onClick={() => void openShell()}>+</button>
        )}
      </div>
      {notice && <div className="terminal-notice" role="alert">{notice}</div>}
      <TerminalView key={runTerminal} terminalId={runTerminal} runId={runId} label="Run terminal" active={current === runTerminal} />
      {tabs.map((t) => (
        <TerminalView
          key={t.terminalId}
          terminalId={t.terminalId}
          runId={runId}
          interactive
          label={t.label}
          active={current === t.terminalId}
          focusTick={focusTick}
          onExit={() => useShellsStore.getState().markExited(runId, t.terminalId)}
        />
      ))}
    </div>
  );
}
