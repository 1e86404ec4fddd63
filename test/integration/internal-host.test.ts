/**
 * Internal hosts through the real CLI (docs/architecture.md §2.8): a git server behind HTTPS on a
 * private address — in a network namespace this test makes, with a veth pair whose /30 the test
 * assigns — is refused by default with a message naming `--internal-host`, and with the flag
 * `airlock run` clones and pushes through the gateway with the token injected. The token is found
 * nowhere in the sandbox, Airlock's records (its home folder) or the CLI's output. The name resolves
 * to the namespace's address only for these runs (the test resolver); the server's CA is trusted
 * through the test's configuration, verification stays on. Real CLI (in process), Docker, keychain,
 * git; the agent is the built-in one driven by the fake upstream.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CliIo } from '../../core/cli/command';
import { main } from '../../core/cli/main';
import { ProviderCatalog } from '../../core/keys/provider-catalog';
import { RunCa } from '../../core/network/gateway/run-ca';
import { startFakeUpstream, type FakeUpstream } from '../fixtures/fake-upstream';
import { requirePrerequisite } from '../support/prerequisites';
import { CANARY_KEY } from '../support/run-fixture';
import { enc, SEARCH_SCRIPT } from '../support/sandbox-search';

const docker = await requirePrerequisite('docker');
const keychain = await requirePrerequisite('keychain');
const netns = await requirePrerequisite('netns');
const exec = promisify(execFile);

const HOST = 'git.corp.airlock.test';
// Made at run time, so the source holds no copy a search could trip over.
const TOKEN = `corp_${randomBytes(20).toString('hex')}`;
const SECRET = `corp${randomBytes(3).toString('hex')}`;
const FILE_CONTROL = 'file-control-internal-7c1';

/** Every file under `dir` that holds `needle`. */
async function filesHolding(dir: string, needle: string): Promise<string[]> {
  const hits: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (!e.isFile()) continue;
    const p = path.join(e.parentPath, e.name);
    if ((await readFile(p)).includes(needle)) hits.push(p);
  }
  return hits;
}

describe.skipIf(!docker.ok || !keychain.ok || !netns.ok)('internal hosts: git over HTTPS on a private address in a namespace the test made (real CLI, Docker, gateway)', () => {
  const tag = randomBytes(3).toString('hex');
  const ns = `airlock-test-${tag}`;
  const vethHost = `alk${tag}h`;
  const vethNs = `alk${tag}n`;
  let subnet = '';
  let serverAddress = '';
  let home: string;
  let project: string;
  let srv: string;
  let upstream: FakeUpstream;
  let server: ChildProcess | undefined;
  let port = 0;
  let caPem = '';
  const served: Array<{ method: string; url: string; authorized: boolean }> = [];
  const printed: string[] = [];

  /** The CLI in this process (for the test resolver), stdin piped (no terminal). */
  async function airlock(args: string[], stdinText = ''): Promise<{ code: number; out: string; err: string }> {
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
        // The name means the namespace's address for these runs only; nothing else resolves.
        resolve: async (h) => {
          if (h !== HOST) throw new Error(`ENOTFOUND ${h}`);
          return [serverAddress];
        },
        upstreamCa: [caPem],
      },
    };
    const code = await main(args, io);
    printed.push(out, err);
    return { code, out, err };
  }

  const runArgs = (...extra: string[]) => ['run', project, '--task', 'clone and push', '--provider', 'anthropic', '--key-env', 'AIRLOCK_TEST_KEY', '--network', 'allowlist', '--allow', `${HOST}:${port}`, '--secret', SECRET, '--json', ...extra];
  /** Everything the agent was told back (the tool results sent to the model). */
  const toolResults = (from: number) => JSON.stringify(upstream.requests.slice(from).map((r) => r.body));

  beforeAll(async () => {
    home = await mkdtemp(path.join(os.tmpdir(), 'airlock-internal-home-'));
    project = await mkdtemp(path.join(os.tmpdir(), 'airlock-internal-project-'));
    srv = await mkdtemp(path.join(os.tmpdir(), 'airlock-internal-git-'));
    await writeFile(path.join(project, 'search.cjs'), `${SEARCH_SCRIPT}\n`);
    await writeFile(path.join(project, 'control.txt'), `${FILE_CONTROL}\n`);
    await exec('bash', ['-c', 'git init -q -b main && git add -A && git -c user.email=t@t.invalid -c user.name=t commit -qm init'], { cwd: project });
    // The served repository, seeded.
    const bare = path.join(srv, 'proj.git');
    const seed = path.join(srv, 'seed');
    await mkdir(seed);
    const git = (cwd: string, ...args: string[]) => exec('git', ['-c', 'user.name=t', '-c', 'user.email=t@t.invalid', '-c', 'init.defaultBranch=main', ...args], { cwd });
    await git(srv, 'init', '-q', '--bare', bare);
    await git(bare, 'config', 'http.receivepack', 'true');
    await git(seed, 'init', '-q');
    await writeFile(path.join(seed, 'README.md'), 'internal seed\n');
    await git(seed, 'add', '.');
    await git(seed, 'commit', '-qm', 'internal seed');
    await git(seed, 'push', '-q', bare, 'HEAD:refs/heads/main');

    // A namespace and a veth pair on a /30 under 10.213.0.0/16 that no interface here uses yet.
    const used = (await exec('ip', ['-4', '-o', 'addr'])).stdout;
    do subnet = `10.213.${randomInt(0, 256)}`;
    while (used.includes(`${subnet}.`));
    serverAddress = `${subnet}.2`;
    await exec('ip', ['netns', 'add', ns]);
    await exec('ip', ['link', 'add', vethHost, 'type', 'veth', 'peer', 'name', vethNs]);
    await exec('ip', ['link', 'set', vethNs, 'netns', ns]);
    await exec('ip', ['addr', 'add', `${subnet}.1/30`, 'dev', vethHost]);
    await exec('ip', ['link', 'set', vethHost, 'up']);
    await exec('ip', ['-n', ns, 'addr', 'add', `${serverAddress}/30`, 'dev', vethNs]);
    await exec('ip', ['-n', ns, 'link', 'set', vethNs, 'up']);
    await exec('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);

    const ca = await RunCa.create('internal-git-server');
    caPem = ca.certificatePem;
    const config = { key: ca.leafKeyPem, cert: await ca.leafFor(HOST), token: TOKEN, root: srv, address: serverAddress };
    const script = path.join(import.meta.dirname, '../fixtures/git-https-backend/server.mjs');
    const child = spawn('ip', ['netns', 'exec', ns, process.execPath, script], { env: { ...process.env, GIT_HTTPS_BACKEND: JSON.stringify(config) }, stdio: ['ignore', 'pipe', 'inherit'] });
    server = child;
    port = await new Promise<number>((resolve, reject) => {
      let buf = '';
      child.once('exit', (code) => reject(new Error(`the git server in ${ns} exited (${code})`)));
      child.stdout.on('data', (c: Buffer) => {
        buf += c.toString();
        let nl: number;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = JSON.parse(buf.slice(0, nl)) as { port?: number; method: string; url: string; authorized: boolean };
          buf = buf.slice(nl + 1);
          if (line.port) resolve(line.port);
          else served.push(line);
        }
      });
    });

    upstream = await startFakeUpstream({ expectedKey: CANARY_KEY });
    await new ProviderCatalog({ home }).setBaseUrl('anthropic', upstream.url);
    const set = await airlock(['secrets', 'set', SECRET, '--host', HOST, '--form', 'basic:x-access-token', '--git'], `${TOKEN}\n`);
    expect(set.code, set.err).toBe(0);
  }, 120_000);

  afterAll(async () => {
    await airlock(['secrets', 'remove', SECRET]).catch(() => undefined);
    server?.kill('SIGTERM');
    await exec('ip', ['link', 'del', vethHost]).catch(() => undefined);
    await exec('ip', ['netns', 'del', ns]).catch(() => undefined);
    await upstream?.close();
    for (const dir of [home, project, srv]) if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('without --internal-host the private address is refused, the message names the flag, and nothing reaches the server', async () => {
    upstream.setScript([
      { toolCalls: [{ name: 'run_command', input: { command: `git clone https://${HOST}:${port}/proj.git /tmp/w 2>&1; echo "[clone $?]"` } }] },
      { toolCalls: [{ name: 'finish', input: { summary: 'tried' } }] },
    ]);
    const from = upstream.requests.length;
    const run = await airlock(runArgs());
    expect(run.code, run.err).toBe(0);
    expect(toolResults(from)).toMatch(/\[clone [1-9]/);
    const blocked = run.out.split('\n').filter(Boolean).map((l) => JSON.parse(l) as { event?: { type?: string; host?: string; reason?: string } }).find((l) => l.event?.type === 'network_blocked')?.event;
    expect(blocked).toMatchObject({ host: HOST });
    expect(blocked?.reason).toContain(`resolves to a private address (${serverAddress})`);
    expect(blocked?.reason).toContain(`--internal-host ${HOST}`);
    expect(served).toEqual([]);
  }, 300_000);

  it('with --internal-host the agent clones and pushes with the token injected, and the token is nowhere in the sandbox, the records or the output', async () => {
    const controls = [enc('HTTPS_PROXY=http://127.0.0.1:'), enc(FILE_CONTROL), enc(TOKEN)].join(' ');
    upstream.setScript([
      { toolCalls: [{ name: 'run_command', input: { command: `git clone -q https://${HOST}:${port}/proj.git /tmp/w 2>&1 && cd /tmp/w && cat README.md && echo pushed-by-agent > agent.txt && git add . && git -c user.name=a -c user.email=a@a.invalid commit -qm 'from the sandbox' && git push -q origin HEAD:refs/heads/agent/one 2>&1; echo "[git $?]"` } }] },
      { toolCalls: [{ name: 'run_command', input: { command: `node -e "$(cat search.cjs)" ${controls}` } }] },
      { toolCalls: [{ name: 'finish', input: { summary: 'cloned and pushed' } }] },
    ]);
    const from = upstream.requests.length;
    const run = await airlock(runArgs('--internal-host', HOST));
    expect(run.code, run.err).toBe(0);
    const told = toolResults(from);
    expect(told).toContain('internal seed');
    expect(told).toContain('[git 0]');
    // The push landed: the server's repository has the agent's commit.
    const { stdout } = await exec('git', ['--git-dir', path.join(srv, 'proj.git'), 'log', '--format=%s', 'agent/one']);
    expect(stdout.trim().split('\n')[0]).toBe('from the sandbox');
    // The server saw the real token on every request that reached git (the gateway swapped it in).
    expect(served.some((r) => r.method === 'POST' && r.url.endsWith('/git-receive-pack') && r.authorized)).toBe(true);
    // git asks without credentials first; only those probes went without the token (and got 401).
    expect(served.filter((r) => !r.authorized).every((r) => r.method === 'GET' && r.url.includes('/info/refs?service='))).toBe(true);

    // The sandbox: processes, command lines and every writable mount (the controls prove the search ran).
    const found = JSON.parse(/\{"files".*?"mounts":\[[^\]]*\]\}/.exec(told.replace(/\\"/g, '"'))?.[0] ?? '{}') as { hits?: string[]; control?: { environ: boolean; file: boolean }; files?: number };
    expect(found.control).toEqual({ environ: true, file: true });
    expect(found.files).toBeGreaterThan(0);
    expect(found.hits).toEqual([]);

    // The run's record names the internal host; its network record too.
    const runId = (JSON.parse(run.out.trim().split('\n').at(-1) as string) as { runId: string }).runId;
    const show = await airlock(['show', runId, '--json']);
    expect(JSON.parse(show.out)).toMatchObject({ internalHosts: [HOST], secrets: [SECRET] });
    const audits = (await filesHolding(home, `"internalHosts":["${HOST}"]`)).filter((f) => f.endsWith('audit.jsonl'));
    expect(audits.length).toBe(1);

    // Airlock's records (its whole home: runs, events, audit, settings) and everything printed.
    expect(await filesHolding(home, TOKEN)).toEqual([]);
    expect(printed.join('\n')).not.toContain(TOKEN);
    expect(told).not.toContain(TOKEN);
  }, 300_000);
});
