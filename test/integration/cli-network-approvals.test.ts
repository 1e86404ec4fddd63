/**
 * `airlock run` without a terminal and a request the gateway's rules refuse (docs/architecture.md
 * §2.8): by default nobody is asked and the agent gets the 403 at once (no question is raised, so
 * nothing waits out the approval window); `--network-approvals ask` puts the question to stdin
 * instead. Real CLI command (in process, for the test resolver), Docker sandbox, egress proxy and
 * gateway; the agent is the built-in one driven by the fake upstream. The target is an HTTPS server
 * on 127.0.0.1 under a made-up `.test` name only the injected resolver knows.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CliIo } from '../../core/cli/command';
import { main } from '../../core/cli/main';
import { ProviderCatalog } from '../../core/keys/provider-catalog';
import { ALLOW_LOOPBACK_TARGETS_FOR_TESTS } from '../../core/network/egress-proxy';
import { startFakeUpstream, type FakeUpstream } from '../fixtures/fake-upstream';
import { startHttpsTarget, type HttpsTarget } from '../support/https-target';
import { requirePrerequisite } from '../support/prerequisites';
import { CANARY_KEY, exec } from '../support/run-fixture';

const docker = await requirePrerequisite('docker');

const HOST = 'cli.airlock.test';

describe.skipIf(!docker.ok)('airlock run without a terminal: refused gateway requests do not wait (real CLI, Docker, gateway)', () => {
  let home: string;
  let project: string;
  let upstream: FakeUpstream;
  let target: HttpsTarget;
  let port = 0;
  let served: string[] = [];

  /** The CLI with a piped (non-TTY) stdin holding `stdinText`. */
  async function airlock(args: string[], stdinText = ''): Promise<{ code: number; out: string; lines: () => Array<Record<string, unknown>>; stderr: string }> {
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    const stdin = new PassThrough();
    let out = '';
    let err = '';
    stdout.on('data', (c: Buffer) => (out += c.toString()));
    stderr.on('data', (c: Buffer) => (err += c.toString()));
    stdin.end(stdinText);
    const io: CliIo = {
      stdout,
      stderr,
      stdin,
      env: { ...process.env, AIRLOCK_HOME: home, AIRLOCK_TEST_KEY: CANARY_KEY },
      egressProxyForTests: {
        resolve: async (h) => {
          if (h !== HOST) throw new Error(`ENOTFOUND ${h}`);
          return ['127.0.0.1'];
        },
        [ALLOW_LOOPBACK_TARGETS_FOR_TESTS]: true,
        upstreamCa: [target.caPem],
      },
    };
    const code = await main(args, io);
    const lines = () =>
      out
        .trim()
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>);
    return { code, out, lines, stderr: err };
  }

  const runArgs = (...extra: string[]) => ['run', project, '--task', 'fetch the private page', '--provider', 'anthropic', '--key-env', 'AIRLOCK_TEST_KEY', '--network', 'allowlist', '--allow', `${HOST}:${port}`, '--rule', `${HOST} allow GET /public/**`, '--json', ...extra];
  const curlScript = () =>
    upstream.setScript([
      { toolCalls: [{ name: 'run_command', input: { command: `curl -sS https://${HOST}:${port}/private/a; echo " [curl $?]"` } }] },
      { toolCalls: [{ name: 'finish', input: { summary: 'tried the page' } }] },
    ]);
  const eventTypes = (lines: Array<Record<string, unknown>>) => lines.map((l) => (l.event as { type?: string } | undefined)?.type).filter(Boolean);
  /** Everything the agent was told back (the tool results sent to the model). */
  const toolResults = (from: number) => JSON.stringify(upstream.requests.slice(from).map((r) => r.body));

  beforeAll(async () => {
    home = await mkdtemp(path.join(os.tmpdir(), 'airlock-cli-netq-home-'));
    project = await mkdtemp(path.join(os.tmpdir(), 'airlock-cli-netq-project-'));
    await exec('bash', ['-c', 'printf "one\\n" > a.txt && git init -q -b main && git add -A && git -c user.email=t@t.invalid -c user.name=t commit -qm init'], { cwd: project });
    target = await startHttpsTarget(HOST, 'cli-netq-target');
    ({ port, served } = target);
    upstream = await startFakeUpstream({ expectedKey: CANARY_KEY });
    await new ProviderCatalog({ home }).setBaseUrl('anthropic', upstream.url);
  });
  afterAll(async () => {
    await upstream?.close();
    await target?.close();
    await rm(home, { recursive: true, force: true });
    await rm(project, { recursive: true, force: true });
  });

  it('by default refuses at once: no question is raised, the agent reads the 403 saying how to allow it, nothing reaches the server', async () => {
    curlScript();
    const from = upstream.requests.length;
    const run = await airlock(runArgs());
    expect(run.code, run.stderr).toBe(0);
    const types = eventTypes(run.lines());
    expect(types).not.toContain('network_approval');
    expect(types).toContain('network_blocked');
    const told = toolResults(from);
    expect(told).toContain('refused');
    expect(told).toContain('network approvals \\"deny\\"');
    expect(told).toContain(`--rule '${HOST} allow GET /private/a'`);
    expect(served).toEqual([]);
    const runId = (run.lines().at(-1) as { runId: string }).runId;
    // The choice is part of the run's record.
    const show = await airlock(['show', runId, '--json']);
    expect(show.out.replace(/\s/g, '')).toContain('"networkApprovals":"deny"');
  }, 300_000);

  it('--network-approvals ask puts the question to stdin: "o" lets the request through once', async () => {
    curlScript();
    const from = upstream.requests.length;
    const run = await airlock(runArgs('--network-approvals', 'ask'), 'o\n');
    expect(run.code, run.stderr).toBe(0);
    expect(eventTypes(run.lines())).toContain('network_approval');
    expect(toolResults(from)).toContain('served GET /private/a');
    expect(served).toEqual(['GET /private/a']);
  }, 300_000);

  it('rejects an unknown --network-approvals value with exit 2 and what the values mean', async () => {
    const run = await airlock(runArgs('--network-approvals', 'maybe'));
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('--network-approvals is ask or deny, not "maybe"');
  });
});
