import { useEffect, useRef } from 'react';
import { FitAddon } from '@xterm/addon-fit';
import { Terminal } from '@xterm/xterm';
import '@xterm/xterm/css/xterm.css';
import { api } from '../api';
import { TerminalSink } from '../terminal/terminal-sink';
import { terminalFlow } from '../terminal/terminal-flow';
import { terminalHub } from '../terminal/terminal-hub';
import { newPart } from '../terminal/live-after-replay';

const encoder = new TextEncoder();

function xtermTheme() {
  return { background: '#0d1117', foreground: '#e6edf3', cursor: '#e6edf3', selectionBackground: '#264f78' };
}

/**
 * An xterm fed directly by the terminal hub (never through React state): the on-disk log is
 * replayed first, then live chunks follow through a batched, bounded sink.
 */
export function TerminalView({ terminalId, interactive = false, label }: { terminalId: string; interactive?: boolean; label: string }) {
  const host = useRef<HTMLDivElement>(null);

  useEffect(() => {
    const el = host.current;
    if (!el) return;
    const term = new Terminal({
      // A run's terminal shows pipe output (bare \n); a shell's is a PTY, which sends \r\n itself.
      convertEol: terminalId.startsWith('run:'),
      scrollback: 5000,
      fontSize: 12.5,
      fontFamily: 'ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace',
      disableStdin: !interactive,
      cursorBlink: interactive,
      theme: xtermTheme(),
    });
    const fit = new FitAddon();
    term.loadAddon(fit);
    term.open(el);
    try { fit.fit(); } catch { /* not laid out yet */ }
    const sink = new TerminalSink(term, { flow: terminalFlow });
    // For tests and the benchmark: the page can read how much reached the terminal.
    el.dataset.terminalId = terminalId;
    const stats = () => {
      el.dataset.rendered = String(sink.stats.renderedBytes);
      el.dataset.received = String(sink.stats.receivedBytes);
      el.dataset.dropped = String(sink.stats.droppedBytes);
      el.dataset.gaps = String(sink.stats.gaps);
    };
    sink.onRendered = stats;

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
      exit: (code) => sink.write(`\r\n\x1b[2m[exited${code === null ? '' : ` with ${code}`}]\x1b[0m\r\n`),
    });
    let cancelled = false;
    void (async () => {
      let offset = 0;
      try {
        for (;;) {
          const page = await api().call('terminals:replay', { terminalId, offset });
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

    const input = interactive ? term.onData((data) => void api().call('terminals:write', { terminalId, data }).catch(() => {})) : undefined;
    const resize = interactive ? term.onResize(({ cols, rows }) => void api().call('terminals:resize', { terminalId, cols, rows }).catch(() => {})) : undefined;
    const observer = new ResizeObserver(() => { try { fit.fit(); } catch { /* hidden */ } });
    observer.observe(el);
    return () => {
      cancelled = true;
      observer.disconnect();
      input?.dispose();
      resize?.dispose();
      detach?.();
      sink.dispose();
      term.dispose();
    };
  }, [terminalId, interactive]);

  return <div className="terminal-host" ref={host} role="log" aria-label={label} />;
}
