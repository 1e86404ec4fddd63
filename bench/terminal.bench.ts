import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { Page } from 'playwright-core';
import { createApiRouter } from '../core/api/router';
import type { AirlockServices } from '../core/api/services';
import type { Event } from '../core/common/disposable';
import type { TerminalOutput } from '../core/common/terminal-output';
import { createFakeServices } from '../test/support/fake-services';
import { startHostServer } from '../core/host/host-server';
import { startFakeUpstream } from '../test/fixtures/fake-upstream';
import { launchChromium } from '../test/e2e/support/browser';
import { ensureBuiltRenderer } from '../test/e2e/support/built-renderer';
import type { Benchmark, BenchResult } from './harness';

const exec = promisify(execFile);
const MB = 1024 * 1024;
/**
 * Two floods, one after the other in the same run and page: a burst into a freshly opened view
 * (cold: JIT, buffers), then a sustained one, several seconds at the budget (the budget's case).
 */
const BURST = Number(process.env.AIRLOCK_BENCH_TERMINAL_BURST_MB ?? 48) * MB;
const SUSTAINED = Number(process.env.AIRLOCK_BENCH_TERMINAL_MB ?? 192) * MB;
const LINE = 'airlock terminal throughput 0123456789 abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ';

interface PageMeasure {
  /** First output rendered, and the end marker rendered (ms since the epoch: the host's clock too). */
  firstAt: number;
  doneAt: number;
  renderedChars: number;
  receivedChars: number;
  droppedChars: number;
  gaps: number;
  peakHeap: number;
}

/**
 * Watches the terminal from inside the page until the command's end marker is on screen: when
 * output first rendered, how much xterm parsed, what the view skipped, and the page's JS heap.
 */
function measureInPage(page: Page, marker: string): Promise<PageMeasure> {
  // A string, not a function: tsx's helpers (__name) do not exist inside the page.
  return page.evaluate(`(async (marker) => {
    const el = document.querySelector('.terminal-host[data-terminal-id]');
    if (!el) throw new Error('no terminal on the page');
    const num = (k) => Number(el.dataset[k] || 0);
    const heap = () => (performance.memory ? performance.memory.usedJSHeapSize : 0);
    const rows = () => el.querySelector('.xterm-rows')?.textContent ?? '';
    const start = num('rendered');
    const base = { rendered: start, received: num('received'), dropped: num('dropped'), gaps: num('gaps') };
    let firstAt = 0, peakHeap = heap();
    const deadline = performance.timeOrigin + performance.now() + 120000;
    for (let i = 0; ; i++) {
      await new Promise((r) => setTimeout(r, 5));
      const now = performance.timeOrigin + performance.now();
      // Reading the heap costs the page CPU: every 50 ms is enough for a peak.
      if (i % 10 === 0) peakHeap = Math.max(peakHeap, heap());
      if (!firstAt && num('rendered') !== start) firstAt = now;
      if (firstAt && rows().includes(marker)) {
        return { firstAt, doneAt: now, renderedChars: num('rendered') - base.rendered, receivedChars: num('received') - base.received,
          droppedChars: num('dropped') - base.dropped, gaps: num('gaps') - base.gaps, peakHeap };
      }
      if (now > deadline) throw new Error('the end marker ' + marker + ' never reached the terminal; on screen: ' + rows().slice(-600));
    }
  })(${JSON.stringify(marker)})`);
}

/**
 * Baseline in the same browser: the same bytes written straight into a bare xterm (bundled here
 * with esbuild), 64 KB at a time, no transport and no app. The ratio shows what the pipeline costs.
 */
async function bareXtermMBps(page: Page, total: number): Promise<number> {
  const { build } = await import('esbuild');
  const out = await build({
    stdin: { contents: "import { Terminal } from '@xterm/xterm'; (globalThis as any).XTerm = Terminal;", loader: 'ts', resolveDir: process.cwd() },
    bundle: true, format: 'iife', write: false, minify: true,
  });
  const css = await import('node:fs/promises').then((fs) => fs.readFile(join(process.cwd(), 'node_modules/@xterm/xterm/css/xterm.css'), 'utf8'));
  await page.setContent(`<style>${css}</style><div id="t" style="width:900px;height:500px"></div>`);
  await page.addScriptTag({ content: out.outputFiles[0]?.text ?? '' });
  return page.evaluate(`(async (total, line) => {
    const term = new XTerm({ scrollback: 5000 });
    term.open(document.getElementById('t'));
    const chunk = (line + '\\r\\n').repeat(Math.floor(65536 / (line.length + 2)));
    const t0 = performance.now();
    let written = 0;
    await new Promise((resolve) => {
      const pump = () => {
        let pending = 0;
        for (let i = 0; i < 16 && written < total; i++, written += chunk.length) {
          pending++;
          term.write(chunk, () => { if (--pending === 0) (written >= total ? resolve() : pump()); });
        }
      };
      pump();
    });
    return written / 1048576 / ((performance.now() - t0) / 1000);
  })(${total}, ${JSON.stringify(LINE)})`);
}

async function dockerAvailable(): Promise<boolean> {
  try {
    await exec('docker', ['info'], { timeout: 15_000 });
    return true;
  } catch {
    return false;
  }
}

/** Printed after each flood; built by the shell so the command line echoed above it does not contain it. */
const NONCE = Math.random().toString(36).slice(2, 10);
const FLOODS = [
  { bytes: BURST, tag: 'AIRLOCK-BENCH-BURST' },
  { bytes: SUSTAINED, tag: 'AIRLOCK-BENCH-END' },
].map((f) => ({ ...f, marker: `${f.tag}-${NONCE}` }));

/** When a flood's first output, and its end marker, reached the host (ms since the epoch). */
interface HostTimes { first?: number; marker?: number }

interface Source {
  services: AirlockServices;
  /** Opens the run's view on the page and lets the first flood go. */
  start(page: Page): Promise<void>;
  /** Lets the next flood go (once the last one is on screen: a flood's end is never skipped, a flood's middle is). */
  next(): Promise<void>;
  /** Per flood, in FLOODS order. */
  hostTimes(): HostTimes[];
  note: string;
  close(): Promise<void>;
}

/** Records when each flood's output first reached the host, and when its marker did. */
function watchFloods(output: Event<TerminalOutput>): { times: HostTimes[]; dispose(): void } {
  const times: HostTimes[] = FLOODS.map(() => ({}));
  const markers = FLOODS.map((f) => Buffer.from(f.marker));
  // The echoed command line holds LINE too, but not followed by a newline.
  const line = Buffer.from(`${LINE}\n`);
  let i = 0;
  const sub = output((o) => {
    const t = times[i];
    if (o.kind !== 'bytes' || !t) return;
    if (!t.first && o.bytes.includes(line)) t.first = Date.now();
    if (t.first && o.bytes.includes(markers[i] as Buffer)) {
      t.marker = Date.now();
      i++;
    }
  });
  return { times, dispose: () => sub.dispose() };
}

/** The real core: commands in a hardened sandbox print the floods; the host runs them for the built-in agent. */
async function realSource(): Promise<Source> {
  const { createAirlockServices } = await import('../core/app-services');
  const home = await mkdtemp(join(tmpdir(), 'airlock-bench-home-'));
  const project = await mkdtemp(join(tmpdir(), 'airlock-bench-project-'));
  await mkdir(join(project, 'src'));
  await writeFile(join(project, 'README.md'), '# bench\n');
  const key = `sk-ant-bench-${'0'.repeat(24)}`;
  const upstream = await startFakeUpstream({ expectedKey: key });
  const command = (f: (typeof FLOODS)[number]) => `yes '${LINE}' | head -c ${f.bytes}; printf '\\n%s-%s\\n' ${f.tag} ${NONCE}`;
  upstream.setScript([
    ...FLOODS.map((f) => ({ toolCalls: [{ name: 'run_command', input: { command: command(f), timeout_seconds: 600 } }] })),
    { toolCalls: [{ name: 'finish', input: { summary: 'printed' } }] },
  ]);
  const services = await createAirlockServices({ env: { ...process.env, AIRLOCK_HOME: home, AIRLOCK_KEYCHAIN_SERVICE: `airlock-bench-${process.pid}` } });
  await services.keys.set({ provider: 'anthropic', key, baseUrl: upstream.url, storage: 'session' });
  let runId = '';
  let approving = true;
  const approved = new Set<string>();
  const watch = watchFloods(services.onDidTerminalOutput as Event<TerminalOutput>);
  const nextApproval = async (): Promise<string> => {
    for (let i = 0; i < 2400 && approving; i++) {
      const id = (await services.runs.get({ runId })).pendingApproval?.requestId;
      if (id) return id;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error('the run never asked to run its command');
  };
  return {
    services,
    hostTimes: () => watch.times,
    note: `\`yes … | head -c\` in a hardened Docker sandbox, run for the built-in agent by the host → channel → RunService → HTTP stream → xterm`,
    async start(page) {
      const run = await services.runs.start({ projectDir: project, task: 'print a lot', agent: 'builtin', provider: 'anthropic', model: 'claude-sonnet-4-5', approval: 'ask', isolation: 'container', network: 'none', limits: { timeoutSec: 900 } });
      runId = run.id;
      // Open the run view while the first command waits for approval, then let each one go.
      const first = await nextApproval();
      await page.getByRole('button', { name: /History/ }).click();
      await page.locator(`tr[data-run="${runId}"]`).click();
      await page.locator('.terminal-host[data-terminal-id]').waitFor();
      await services.runs.approve({ runId, requestId: first, approved: true });
      approved.add(first);
    },
    async next() {
      let id = await nextApproval();
      while (approved.has(id)) id = await nextApproval();
      approved.add(id);
      await services.runs.approve({ runId, requestId: id, approved: true });
    },
    async close() {
      approving = false;
      watch.dispose();
      if (runId) await services.runs.cancel({ runId }).catch(() => undefined);
      await services.dispose();
      await upstream.close();
      await rm(home, { recursive: true, force: true });
      await rm(project, { recursive: true, force: true });
    },
  };
}

/** Without Docker: the same host, transport and UI, fed by an in-process producer as fast as it can. */
async function syntheticSource(): Promise<Source> {
  const services = createFakeServices({ autoFinish: false });
  const times: HostTimes[] = FLOODS.map(() => ({}));
  let emit: ((flood: (typeof FLOODS)[number], t: HostTimes) => void) | undefined;
  let started = 0;
  return {
    services,
    hostTimes: () => times,
    note: 'in-process producer (no Docker engine answered) → HTTP stream → xterm',
    async start(page) {
      const run = await services.runs.start({ projectDir: '/bench', task: 'print a lot', agent: 'builtin', provider: 'anthropic', model: 'm', approval: 'auto', isolation: 'container', network: 'none', limits: { timeoutSec: 900 } });
      await new Promise((r) => setTimeout(r, 100));
      await page.getByRole('button', { name: /History/ }).click();
      await page.locator(`tr[data-run="${run.id}"]`).click();
      await page.locator('.terminal-host[data-terminal-id]').waitFor();
      emit = (flood, t) => {
        const chunk = `${LINE}\r\n`.repeat(Math.floor(65536 / (LINE.length + 2)));
        let sent = 0;
        t.first = Date.now();
        const pump = () => {
          for (let i = 0; i < 16 && sent < flood.bytes; i++, sent += chunk.length) services.emitOutput(run.id, chunk);
          if (sent < flood.bytes) return void setImmediate(pump);
          services.emitOutput(run.id, `\r\n${flood.marker}\r\n`);
          t.marker = Date.now();
        };
        pump();
      };
      emit(FLOODS[0] as (typeof FLOODS)[number], times[0] as HostTimes);
    },
    async next() {
      const f = ++started;
      if (FLOODS[f]) emit?.(FLOODS[f], times[f] as HostTimes);
    },
    async close() {
      await services.dispose();
    },
  };
}

/**
 * The transport alone, in the same browser: MB/s a page receives from a loopback server as one
 * streamed fetch response, and as WebSocket messages of the same size (the other way to push).
 */
async function transportMBps(page: Page, total: number): Promise<{ fetch: number; ws: number }> {
  const { createServer } = await import('node:http');
  const { WebSocketServer } = await import('ws');
  const frame = 256 * 1024;
  const payload = 'x'.repeat(frame);
  const server = createServer((req, res) => {
    if (req.url !== '/s') return void res.end('<!doctype html><title>transport</title>');
    let sent = 0;
    const pump = () => {
      while (sent < total) {
        sent += frame;
        if (!res.write(payload)) return void res.once('drain', pump);
      }
      res.end();
    };
    pump();
  });
  const wss = new WebSocketServer({ server, perMessageDeflate: false });
  wss.on('connection', (ws) => {
    let sent = 0;
    const pump = () => {
      while (sent < total && ws.bufferedAmount < 8 * MB) {
        ws.send(payload);
        sent += frame;
      }
      if (sent < total) setTimeout(pump, 1);
    };
    pump();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as AddressInfo).port;
  try {
    await page.goto(`http://127.0.0.1:${port}/`);
    const viaFetch = await page.evaluate(`(async () => {
      const reader = (await fetch('/s')).body.getReader(); const dec = new TextDecoder();
      let n = 0; const t0 = performance.now();
      for (;;) { const { done, value } = await reader.read(); if (done) break; n += dec.decode(value, { stream: true }).length; }
      return n / 1048576 / ((performance.now() - t0) / 1000);
    })()`);
    const viaWs = await page.evaluate(`new Promise((resolve) => {
      const ws = new WebSocket('ws://127.0.0.1:${port}/'); let n = 0, t0 = 0;
      ws.onmessage = (m) => { if (!t0) t0 = performance.now(); n += m.data.length; if (n >= ${total}) { ws.close(); resolve(n / 1048576 / ((performance.now() - t0) / 1000)); } };
    })`);
    return { fetch: Number(viaFetch), ws: Number(viaWs) };
  } finally {
    wss.close();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
}

export const benchmarks: Benchmark[] = [
  {
    name: 'terminal.throughput',
    requires: ['chromium'],
    async run(): Promise<BenchResult[]> {
      const rendererDir = await ensureBuiltRenderer();
      const source = process.env.AIRLOCK_BENCH_TERMINAL_SOURCE !== 'synthetic' && (await dockerAvailable()) ? await realSource() : await syntheticSource();
      const host = await startHostServer({ router: createApiRouter(source.services), rendererDir, ...(source.services.onDidTerminalOutput ? { terminalOutput: source.services.onDidTerminalOutput } : {}) });
      const { browser, close } = await launchChromium();
      let peakRss = process.memoryUsage().rss;
      const rssTimer = setInterval(() => { peakRss = Math.max(peakRss, process.memoryUsage().rss); }, 50);
      try {
        const page = await browser.newPage();
        await page.goto(host.url);
        await page.getByRole('button', { name: /History/ }).waitFor();
        await source.start(page);
        const measured: PageMeasure[] = [];
        for (const [i, f] of FLOODS.entries()) {
          if (i > 0) await source.next();
          measured.push(await measureInPage(page, f.marker));
        }
        await page.close();
        const bare = await bareXtermMBps(await browser.newPage(), 24 * MB);
        const transport = await transportMBps(await browser.newPage(), 64 * MB);
        const hostTimes = source.hostTimes();
        // Each flood from its first byte reaching the host (a view slow to show anything cannot
        // look faster) to its last byte on screen.
        const rate = (i: number) => {
          const m = measured[i] as PageMeasure;
          const f = FLOODS[i] as (typeof FLOODS)[number];
          const h = hostTimes[i] ?? {};
          const seconds = (m.doneAt - (h.first ?? m.firstAt)) / 1000;
          const hostSeconds = h.first && h.marker ? (h.marker - h.first) / 1000 : undefined;
          const skipped = f.bytes - Math.min(f.bytes, m.renderedChars);
          const view = m.gaps
            ? `xterm parsed ${(m.renderedChars / MB).toFixed(1)} MB; ${(skipped / MB).toFixed(1)} MB skipped in the live view behind ${m.gaps} gap marker(s), all of it in the log on disk`
            : 'xterm parsed every byte';
          const note = `${f.bytes / MB} MB of command output, from the first byte reaching the host to the last byte on screen in ${seconds.toFixed(2)} s; the page received ${(m.receivedChars / MB).toFixed(1)} MB of it (flow control: what it can draw); ${view}`;
          return { mbps: f.bytes / MB / seconds, hostMbps: hostSeconds ? f.bytes / MB / hostSeconds : undefined, rendered: m.renderedChars / MB / seconds, note, m };
        };
        const burst = rate(0);
        const sustained = rate(1);
        return [
          { name: 'terminal.throughput', value: sustained.mbps, unit: 'MB/s', budget: '≥ 30 MB/s, memory bounded', note: `sustained: ${sustained.note}. ${source.note}` },
          ...(sustained.hostMbps ? [{ name: 'terminal.throughput.host', value: sustained.hostMbps, unit: 'MB/s', note: 'the same output from its first byte to its last reaching the host (sandbox → channel → RunService), the part of the path before the page' }] : []),
          { name: 'terminal.throughput.burst', value: burst.mbps, unit: 'MB/s', note: `the first flood into a freshly opened view (cold JIT and buffers everywhere), same path: ${burst.note}${burst.hostMbps ? `; into the host ${burst.hostMbps.toFixed(1)} MB/s` : ''}` },
          { name: 'terminal.throughput.rendered', value: sustained.rendered, unit: 'MB/s', baseline: bare, ratio: sustained.rendered / bare, note: 'what xterm parsed during the sustained flood (in a flood the view redraws the newest output at most every 100 ms), against a bare xterm fed 64 KB writes in the same browser (the ceiling of rendering here)' },
          { name: 'terminal.transport.fetch_stream', value: transport.fetch, unit: 'MB/s', baseline: transport.ws, ratio: transport.fetch / transport.ws, note: 'a page receiving 64 MB from loopback as one streamed fetch (how terminal output travels), against WebSocket messages of 256 KB' },
          { name: 'terminal.throughput.page_heap_peak', value: Math.max(burst.m.peakHeap, sustained.m.peakHeap) / MB, unit: 'MB', budget: 'bounded', note: 'Chromium JS heap (performance.memory) while streaming' },
          { name: 'terminal.throughput.host_rss_peak', value: peakRss / MB, unit: 'MB', budget: 'bounded', note: 'host process RSS (core + HTTP host) while streaming' },
        ];
      } finally {
        clearInterval(rssTimer);
        await close();
        await host.close();
        await source.close();
      }
    },
  },
];
