import { useEffect, useRef, useState } from 'react';
import { FitAddon } from '@xterm/addon-fit';
import { SearchAddon } from '@xterm/addon-search';
import { WebLinksAddon } from '@xterm/addon-web-links';
import { Terminal } from '@xterm/xterm';
import '@xterm/xterm/css/xterm.css';
import { useResolvedTheme } from '../lib/theme';
import { useAppStore } from '../stores/app-store';
import { useRunsStore } from '../stores/runs-store';
import { useShellsStore } from '../stores/shells-store';
import { bufferText } from '../terminal/buffer-text';
import { newPart } from '../terminal/live-after-replay';
import { needsPreviewPorts, openExternalLink } from '../terminal/open-link';
import { terminalFlow } from '../terminal/terminal-flow';
import { terminalHub } from '../terminal/terminal-hub';
import { TerminalSink } from '../terminal/terminal-sink';
import { xtermTheme } from '../terminal/xterm-theme';
import { TerminalSearch } from './terminal-search';

const encoder = new TextEncoder();
/** Resizes settle before the PTY hears of them: a dragged window sends one resize, not fifty. */
const RESIZE_DEBOUNCE_MS = 80;

function refuseLink(uri: string): void {
  useAppStore.getState().notify('error', `Not opened: ${uri.slice(0, 120)}. Terminal links open only for https pages and this run's published preview ports; publish the sandbox port under Network to preview it.`);
}

/** Opens a terminal link; a loopback one only for a port the run has published (asked from the host, however it was published). */
function openLink(uri: string, runId: string | undefined): void {
  if (!needsPreviewPorts(uri)) {
    if (!openExternalLink(uri)) refuseLink(uri);
    return;
  }
  if (!runId) return refuseLink(uri);
  void useRunsStore.getState()
    .previewPorts(runId)
    .then(
      (ports) => {
        if (!openExternalLink(uri, ports)) refuseLink(uri);
      },
      () => refuseLink(uri),
    );
}

async function copyText(text: string, what: string): Promise<void> {
  try {
    await navigator.clipboard.writeText(text);
    useAppStore.getState().notify('success', `Copied ${what}`);
  } catch {
    useAppStore.getState().notify('error', 'Could not copy: the clipboard was refused. Select the text and press Ctrl+C (⌘C) instead.');
  }
}

interface Xterm {
  term: Terminal;
  search: SearchAddon;
}

/**
 * An xterm fed directly by the terminal hub (never through React state): the on-disk log is
 * replayed first, then live chunks follow through a batched, bounded sink. An interactive one (a
 * shell) takes the keyboard when shown and keeps its PTY at the view's size. Ctrl/⌘+F searches;
 * links open through the app's one link rule (contracts/external-links.ts).
 */
export function TerminalView({ terminalId, runId, interactive = false, label, active = true, focusTick, onExit }: {
  terminalId: string;
  /** The run the terminal belongs to: its published ports are the loopback links that open. */
  runId?: string;
  interactive?: boolean;
  label: string;
  /** Shown (tabs keep hidden terminals mounted, so their screen and scrollback stay). */
  active?: boolean;
  /** Changes when the user picks this terminal again: a shown shell takes the keyboard. */
  focusTick?: number;
  onExit?: (code: number | null) => void;
}) {
  const host = useRef<HTMLDivElement>(null);
  const xterm = useRef<Xterm>(undefined);
  const fitNow = useRef<() => void>(() => {});
  const exitRef = useRef(onExit);
  exitRef.current = onExit;
  const runIdRef = useRef(runId);
  runIdRef.current = runId;
  const theme = useResolvedTheme();
  const themeRef = useRef(theme);
  themeRef.current = theme;
  const [searching, setSearching] = useState(false);

  useEffect(() => {
    const el = host.current;
    if (!el) return;
    const shells = useShellsStore.getState();
    const term = new Terminal({
      // A run's terminal shows pipe output (bare \n); a shell's is a PTY, which sends \r\n itself.
      convertEol: terminalId.startsWith('run:'),
      scrollback: 5000,
      fontSize: 12.5,
      fontFamily: 'ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace',
      disableStdin: !interactive,
      cursorBlink: interactive,
      theme: xtermTheme(themeRef.current),
      // The search addon draws its highlights as decorations, which xterm 6 still marks as proposed API.
      allowProposedApi: true,
      // OSC 8 hyperlinks go through the same rule as plain links; never xterm's own opener.
      linkHandler: { activate: (_e, uri) => openLink(uri, runIdRef.current), allowNonHttpProtocols: false },
    });
    const fit = new FitAddon();
    const search = new SearchAddon({ highlightLimit: 1000 });
    term.loadAddon(fit);
    term.loadAddon(search);
    term.loadAddon(new WebLinksAddon((_e, uri) => openLink(uri, runIdRef.current)));
    term.attachCustomKeyEventHandler((e) => {
      if (e.type === 'keydown' && (e.ctrlKey || e.metaKey) && !e.altKey && e.key.toLowerCase() === 'f') {
        e.preventDefault();
        setSearching(true);
        return false;
      }
      return true;
    });
    term.open(el);
    xterm.current = { term, search };
    const sink = new TerminalSink(term, { flow: terminalFlow });
    // For tests and the benchmark: the page can read how much reached the terminal, and its size.
    el.dataset.terminalId = terminalId;
    const stats = () => {
      el.dataset.rendered = String(sink.stats.renderedBytes);
      el.dataset.received = String(sink.stats.receivedBytes);
      el.dataset.dropped = String(sink.stats.droppedBytes);
      el.dataset.gaps = String(sink.stats.gaps);
    };
    sink.onRendered = stats;

    // The PTY follows the view: at open, and after every resize has settled. A terminal mounted
    // hidden has no size yet: it fits, and tells the PTY, when it is shown.
    let sent = '';
    const sendSize = () => {
      el.dataset.cols = String(term.cols);
      el.dataset.rows = String(term.rows);
      const size = `${term.cols}x${term.rows}`;
      if (!interactive || size === sent) return;
      sent = size;
      void shells.resize(terminalId, term.cols, term.rows).catch(() => {});
    };
    const resized = term.onResize(sendSize);
    fitNow.current = () => {
      if (!el.clientWidth || !el.clientHeight) return;
      try { fit.fit(); } catch { /* not laid out yet */ }
      sendSize();
    };
    fitNow.current();
    let debounce: ReturnType<typeof setTimeout> | undefined;
    const observer = new ResizeObserver(() => {
      clearTimeout(debounce);
      debounce = setTimeout(() => fitNow.current(), RESIZE_DEBOUNCE_MS);
    });
    observer.observe(el);

    // Live chunks that arrive while the log replays are held; afterwards, only what the replay
    // did not already show is written (chunks carry their end offset in the log), whichever of
    // the replay and the live transport was faster.
    let replayedTo: number | undefined;
    const held: Array<() => void> = [];
    const write = (d: string | Uint8Array, end?: number) => {
      if (replayedTo === undefined) return void held.push(() => write(d, end));
      const part = newPart(typeof d === 'string' ? encoder.encode(d) : d, end, replayedTo);
      if (part.length) sink.write(part);
    };
    const gap = (n: number, end?: number) => {
      if (replayedTo === undefined) return void held.push(() => gap(n, end));
      if (end === undefined || end > replayedTo) sink.gap(n);
    };
    const detach = terminalHub()?.attach(terminalId, {
      write,
      gap,
      exit: (code) => {
        sink.write(`\r\n\x1b[2m[exited${code === null ? '' : ` with ${code}`}]\x1b[0m\r\n`);
        exitRef.current?.(code);
      },
    });
    let cancelled = false;
    void (async () => {
      let offset = 0;
      try {
        for (;;) {
          const page = await shells.replay(terminalId, offset);
          if (cancelled) return;
          sink.write(page.data);
          offset = page.nextOffset;
          if (page.done || !page.data) break;
        }
      } catch {
        // No log yet (run just queued): live output follows.
      }
      replayedTo = offset;
      for (const deliver of held.splice(0)) deliver();
    })();

    const input = interactive ? term.onData((data) => void shells.write(terminalId, data).catch(() => {})) : undefined;
    return () => {
      cancelled = true;
      clearTimeout(debounce);
      observer.disconnect();
      input?.dispose();
      resized.dispose();
      detach?.();
      sink.dispose();
      xterm.current = undefined;
      fitNow.current = () => {};
      term.dispose();
    };
  }, [terminalId, interactive]);

  useEffect(() => {
    if (xterm.current) xterm.current.term.options.theme = xtermTheme(theme);
  }, [theme]);

  useEffect(() => {
    if (!active) return;
    fitNow.current();
    if (interactive && !searching) xterm.current?.term.focus();
  }, [active, interactive, searching, terminalId, focusTick]);

  const copySelection = () => {
    const text = xterm.current?.term.getSelection();
    if (text) void copyText(text, 'the selection');
    else useAppStore.getState().notify('info', 'Nothing is selected: select text in the terminal first, or use Copy all.');
  };

  const closeSearch = () => {
    setSearching(false);
    xterm.current?.search.clearDecorations();
  };

  return (
    <div className="terminal-view" hidden={!active}>
      <div className="terminal-toolbar" role="toolbar" aria-label={`${label} tools`}>
        {searching && xterm.current ? (
          <TerminalSearch search={xterm.current.search} theme={theme} label={label} onClose={closeSearch} />
        ) : (
          <button className="btn small" onClick={() => setSearching(true)} title="Search (Ctrl+F / ⌘F)">Search</button>
        )}
        <span style={{ flex: 1 }} />
        <button className="btn small" title="Copy the selected text" onClick={copySelection}>Copy</button>
        <button className="btn small" onClick={() => xterm.current && void copyText(bufferText(xterm.current.term.buffer.active), 'the whole terminal')}>Copy all</button>
      </div>
      <div className="terminal-host" ref={host} role="log" aria-label={label} />
    </div>
  );
}
