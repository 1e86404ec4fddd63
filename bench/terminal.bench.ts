import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { Page } from 'playwright-core';
import { createApiRouter } from '../core/api/router';
import type { AirlockServices } from '../core/api/services';
import { createFakeServices } from '../core/api/testing/fake-services';
import { startHostServer } from '../core/host/host-server';
import { startFakeUpstream } from '../test/fixtures/fake-upstream';
import { launchChromium } from '../test/e2e/support/browser';
import { ensureBuiltRenderer } from '../test/e2e/support/built-renderer';
import type { Benchmark, BenchResult } from './harness';

const exec = promisify(execFile);
const MB = 1024 * 1024;
/** Output size: enough for several seconds at the budget, small enough for a shared 2-core box. */
const TOTAL = Number(process.env.AIRLOCK_BENCH_TERMINAL_MB ?? 48) * MB;
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
      if (now > deadline) throw new Error('the end marker never reached the terminal');
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

/** Printed after the flood; built by the shell so the command line echoed above it does not contain it. */
const NONCE = Math.random().toString(36).slice(2, 10);
const MARKER = `AIRLOCK-BENCH-END-${NONCE}`;

interface Source {
  services: AirlockServices;
  start(page: Page): Promise<void>;
  /** When the command's first output, and its end marker, reached the host (ms since the epoch). */
  hostTimes(): { first?: number; marker?: number };
  note: string;
  close(): Promise<void>;
}

/** The real core: a command in a hardened sandbox prints TOTAL bytes; the built-in agent streams them. */
async function realSource(): Promise<Source> {
  const { createAirlockServices } = await import('../core/app-services');
  const home = await mkdtemp(join(tmpdir(), 'airlock-bench-home-'));
  const project = await mkdtemp(join(tmpdir(), 'airlock-bench-project-'));
  await mkdir(join(project, 'src'));
  await writeFile(join(project, 'README.md'), '# bench\n');
  const key = `sk-ant-bench-${'0'.repeat(24)}`;
  const upstream = await startFakeUpstream({ expectedKey: key });
  const command = `yes '${LINE}' | head -c ${TOTAL}; printf '\\nAIRLOCK-BENCH-%s\\n' END-${NONCE}`;
  upstream.setScript([
    { toolCalls: [{ name: 'run_command', input: { command, timeout_seconds: 600 } }] },
    { toolCalls: [{ name: 'finish', input: { summary: 'printed' } }] },
  ]);
  const services = await createAirlockServices({ env: { ...process.env, AIRLOCK_HOME: home, AIRLOCK_KEYCHAIN_SERVICE: `airlock-bench-${process.pid}` } });
  await services.keys.set({ provider: 'anthropic', key, baseUrl: upstream.url, storage: 'session' });
  let runId = '';
  const times: { first?: number; marker?: number } = {};
  // The echoed command line holds LINE too, but not followed by a newline.
  const output = Buffer.from(`${LINE}\n`);
  const watch = services.onDidTerminalOutput?.((o) => {
    if (o.kind !== 'bytes') return;
    if (!times.first && o.bytes.includes(output)) times.first = Date.now();
    if (!times.marker && o.bytes.includes(MARKER)) times.marker = Date.now();
  });
  return {
    services,
    hostTimes: () => times,
    note: `\`yes … | head -c ${TOTAL / MB}M\` in a hardened Docker sandbox, run for the built-in agent by the host → channel → RunService → HTTP stream → xterm`,
    async start(page) {
      const run = await services.runs.start({ projectDir: project, task: 'print a lot', agent: 'builtin', provider: 'anthropic', model: 'claude-sonnet-4-5', approval: 'ask', isolation: 'container', network: 'none', limits: { timeoutSec: 900 } });
      runId = run.id;
      // Open the run view while the command waits for approval, then let it go.
      let requestId = '';
      for (let i = 0; i < 1200 && !requestId; i++) {
        requestId = (await services.runs.get({ runId })).pendingApproval?.requestId ?? '';
        if (!requestId) await new Promise((r) => setTimeout(r, 250));
      }
      if (!requestId) throw new Error('the run never asked to run its command');
      await page.getByRole('button', { name: /History/ }).click();
      await page.locator(`tr[data-run="${runId}"]`).click();
      await page.locator('.terminal-host[data-terminal-id]').waitFor();
      await services.runs.approve({ runId, requestId, approved: true });
    },
    async close() {
      watch?.dispose();
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
  const times: { first?: number; marker?: number } = {};
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
      const chunk = `${LINE}\r\n`.repeat(Math.floor(65536 / (LINE.length + 2)));
      let sent = 0;
      times.first = Date.now();
      const pump = () => {
        for (let i = 0; i < 16 && sent < TOTAL; i++, sent += chunk.length) services.emitOutput(run.id, chunk);
        if (sent < TOTAL) setImmediate(pump);
        else {
          services.emitOutput(run.id, `\r\n${MARKER}\r\n`);
          times.marker = Date.now();
        }
      };
      pump();
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
        const m = await measureInPage(page, MARKER);
        await page.close();
        const bare = await bareXtermMBps(await browser.newPage(), Math.min(TOTAL, 24 * MB));
        const transport = await transportMBps(await browser.newPage(), 64 * MB);
        // From the host's first output byte, so a view that is slow to show anything cannot look faster.
        const hostTimes = source.hostTimes();
        const startedAt = hostTimes.first ?? m.firstAt;
        const seconds = (m.doneAt - startedAt) / 1000;
        const hostSeconds = hostTimes.first && hostTimes.marker ? (hostTimes.marker - hostTimes.first) / 1000 : undefined;
        const mbps = TOTAL / MB / seconds;
        const rendered = m.renderedChars / MB / seconds;
        const skipped = TOTAL - Math.min(TOTAL, m.renderedChars);
        const view = m.gaps
          ? `xterm parsed ${(m.renderedChars / MB).toFixed(1)} MB; ${(skipped / MB).toFixed(1)} MB skipped in the live view behind ${m.gaps} gap marker(s), all of it in the log on disk`
          : 'xterm parsed every byte';
        return [
          { name: 'terminal.throughput', value: mbps, unit: 'MB/s', budget: '≥ 30 MB/s, memory bounded', note: `${TOTAL / MB} MB of command output, from the first byte reaching the host to the last byte on screen in ${seconds.toFixed(2)} s; the page received ${(m.receivedChars / MB).toFixed(1)} MB of it (flow control: what it can draw); ${view}. ${source.note}` },
          ...(hostSeconds ? [{ name: 'terminal.throughput.host', value: TOTAL / MB / hostSeconds, unit: 'MB/s', note: 'the same output from its first byte to its last reaching the host (sandbox → channel → RunService), the part of the path before the page' }] : []),
          { name: 'terminal.throughput.rendered', value: rendered, unit: 'MB/s', baseline: bare, ratio: rendered / bare, note: 'what xterm parsed in that time, against a bare xterm fed 64 KB writes in the same browser (the ceiling of rendering here)' },
          { name: 'terminal.transport.fetch_stream', value: transport.fetch, unit: 'MB/s', baseline: transport.ws, ratio: transport.fetch / transport.ws, note: 'a page receiving 64 MB from loopback as one streamed fetch (how terminal output travels), against WebSocket messages of 256 KB' },
          { name: 'terminal.throughput.page_heap_peak', value: m.peakHeap / MB, unit: 'MB', budget: 'bounded', note: 'Chromium JS heap (performance.memory) while streaming' },
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
