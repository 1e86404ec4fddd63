import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
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
  firstAt: number;
  lastAt: number;
  renderedChars: number;
  atFirst: number;
  gaps: number;
  peakHeap: number;
}

/**
 * Watches the rendered terminal from inside the page: when xterm has parsed output (its write
 * callbacks, counted by the terminal sink), and the page's JS heap, until output stops.
 */
function measureInPage(page: Page, target: number): Promise<PageMeasure> {
  // A string, not a function: tsx's helpers (__name) do not exist inside the page.
  return page.evaluate(`(async (goal) => {
    const el = document.querySelector('.terminal-host[data-terminal-id]');
    if (!el) throw new Error('no terminal on the page');
    const rendered = () => Number(el.dataset.rendered || 0);
    const heap = () => (performance.memory ? performance.memory.usedJSHeapSize : 0);
    const start = rendered();
    let firstAt = 0, atFirst = start, lastAt = 0, last = start, lastChange = performance.now(), peakHeap = heap();
    for (;;) {
      await new Promise((r) => setTimeout(r, 10));
      const now = performance.now();
      const r = rendered();
      peakHeap = Math.max(peakHeap, heap());
      if (r !== last) {
        if (!firstAt) { firstAt = now; atFirst = last; }
        last = r; lastAt = now; lastChange = now;
      }
      if (r - start >= goal || (firstAt && now - lastChange > 4000) || (!firstAt && now - lastChange > 120000)) break;
    }
    return { firstAt, lastAt, renderedChars: last - atFirst, atFirst, gaps: Number(el.dataset.gaps || 0), peakHeap };
  })(${target})`);
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

/** The real core: a command in a hardened sandbox prints TOTAL bytes; the built-in agent streams them. */
async function realSource(): Promise<{ services: AirlockServices; start(page: Page): Promise<void>; note: string; close(): Promise<void> }> {
  const { createAirlockServices } = await import('../core/app-services');
  const home = await mkdtemp(join(tmpdir(), 'airlock-bench-home-'));
  const project = await mkdtemp(join(tmpdir(), 'airlock-bench-project-'));
  await mkdir(join(project, 'src'));
  await writeFile(join(project, 'README.md'), '# bench\n');
  const key = `sk-ant-bench-${'0'.repeat(24)}`;
  const upstream = await startFakeUpstream({ expectedKey: key });
  const command = `yes '${LINE}' | head -c ${TOTAL}`;
  upstream.setScript([
    { toolCalls: [{ name: 'run_command', input: { command, timeout_seconds: 600 } }] },
    { toolCalls: [{ name: 'finish', input: { summary: 'printed' } }] },
  ]);
  const services = await createAirlockServices({ env: { ...process.env, AIRLOCK_HOME: home, AIRLOCK_KEYCHAIN_SERVICE: `airlock-bench-${process.pid}` } });
  await services.keys.set({ provider: 'anthropic', key, baseUrl: upstream.url, storage: 'session' });
  let runId = '';
  return {
    services,
    note: `source: \`${command.slice(0, 40)}…\` in a hardened Docker sandbox via the built-in agent, channel, RunService, WebSocket host`,
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
      if (runId) await services.runs.cancel({ runId }).catch(() => undefined);
      await services.dispose();
      await upstream.close();
      await rm(home, { recursive: true, force: true });
      await rm(project, { recursive: true, force: true });
    },
  };
}

/** Without Docker: the same host, transport and UI, fed by an in-process producer. */
async function syntheticSource(): Promise<{ services: AirlockServices; start(page: Page): Promise<void>; note: string; close(): Promise<void> }> {
  const services = createFakeServices({ autoFinish: false });
  return {
    services,
    note: 'source: in-process producer (no Docker engine answered), through the WebSocket host and UI',
    async start(page) {
      const run = await services.runs.start({ projectDir: '/bench', task: 'print a lot', agent: 'builtin', provider: 'anthropic', model: 'm', approval: 'auto', isolation: 'container', network: 'none', limits: { timeoutSec: 900 } });
      await new Promise((r) => setTimeout(r, 100));
      await page.getByRole('button', { name: /History/ }).click();
      await page.locator(`tr[data-run="${run.id}"]`).click();
      await page.locator('.terminal-host[data-terminal-id]').waitFor();
      const chunk = `${LINE}\r\n`.repeat(Math.floor(16384 / (LINE.length + 2)));
      let sent = 0;
      const pump = () => {
        for (let i = 0; i < 64 && sent < TOTAL; i++, sent += chunk.length) services.emitOutput(run.id, chunk);
        if (sent < TOTAL) setImmediate(pump);
      };
      pump();
    },
    async close() {
      await services.dispose();
    },
  };
}

export const benchmarks: Benchmark[] = [
  {
    name: 'terminal.throughput',
    requires: ['chromium'],
    async run(): Promise<BenchResult[]> {
      const rendererDir = await ensureBuiltRenderer();
      const source = process.env.AIRLOCK_BENCH_TERMINAL_SOURCE !== 'synthetic' && (await dockerAvailable()) ? await realSource() : await syntheticSource();
      const host = await startHostServer({ router: createApiRouter(source.services), rendererDir });
      const { browser, close } = await launchChromium();
      let peakRss = process.memoryUsage().rss;
      const rssTimer = setInterval(() => { peakRss = Math.max(peakRss, process.memoryUsage().rss); }, 50);
      try {
        const page = await browser.newPage();
        await page.goto(host.url);
        await page.getByRole('button', { name: /History/ }).waitFor();
        const measuring = source.start(page).then(() => measureInPage(page, TOTAL * 0.98));
        const m = await measuring;
        const baseline = await bareXtermMBps(await browser.newPage(), Math.min(TOTAL, 24 * MB));
        const seconds = (m.lastAt - m.firstAt) / 1000;
        const mbps = seconds > 0 ? m.renderedChars / MB / seconds : Number.NaN;
        const dropped = Math.max(0, TOTAL - m.renderedChars);
        const drops = m.gaps ? `; ${m.gaps} gap marker(s), ${(dropped / MB).toFixed(1)} MB dropped from the live view (kept on disk)` : '; nothing dropped';
        return [
          { name: 'terminal.throughput', value: mbps, unit: 'MB/s', baseline, ratio: mbps / baseline, budget: '≥ 30 MB/s (baseline: a bare xterm in the same browser)', note: `${(m.renderedChars / MB).toFixed(1)} MB rendered in xterm (Chromium) in ${seconds.toFixed(2)} s${drops}; ${source.note}` },
          { name: 'terminal.throughput.page_heap_peak', value: m.peakHeap / MB, unit: 'MB', budget: 'bounded', note: 'Chromium JS heap (performance.memory) while streaming' },
          { name: 'terminal.throughput.host_rss_peak', value: peakRss / MB, unit: 'MB', budget: 'bounded', note: 'host process RSS (core + WebSocket host) while streaming' },
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
