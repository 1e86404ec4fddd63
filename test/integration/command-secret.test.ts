/**
 * A secret defined as a host command, through the real CLI, Docker sandbox and egress gateway
 * (docs/architecture.md §2.8, "Secrets fetched when used"). `airlock secrets set … --command` names a
 * script that counts its runs in a file and prints a token; an HTTPS server on 127.0.0.1 (a made-up
 * `.test` name only the test resolver knows; its CA trusted through the test's configuration) answers
 * 401 to the first token and 200 to the second. The agent (the built-in one, driven by the fake
 * upstream) POSTs a body with curl: the command runs once before the 401 and once after, the same
 * body goes again, curl sees 200; neither token is in the sandbox, Airlock's home (runs, audit) or
 * anything the CLI printed; the audit says the secret was fetched, by name.
 */
import { randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { chmod, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import https from 'node:https';
import type net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CliIo } from '../../core/cli/command';
import { main } from '../../core/cli/main';
import { ProviderCatalog } from '../../core/keys/provider-catalog';
import { ALLOW_LOOPBACK_TARGETS_FOR_TESTS } from '../../core/network/egress-proxy';
import { RunCa } from '../../core/network/gateway/run-ca';
import { startFakeUpstream, type FakeUpstream } from '../fixtures/fake-upstream';
import { requirePrerequisite } from '../support/prerequisites';
import { CANARY_KEY } from '../support/run-fixture';
import { enc, SEARCH_SCRIPT } from '../support/sandbox-search';

const docker = await requirePrerequisite('docker');
const keychain = await requirePrerequisite('keychain');
const exec = promisify(execFile);

const HOST = 'api.cmdsecret.airlock.test';
// Made at run time, so the source holds no token a search could trip over.
const SALT = randomBytes(10).toString('hex');
const token = (n: number) => `tok_${SALT}_${n}`;
const SECRET = `cmd${randomBytes(3).toString('hex')}`;
const FILE_CONTROL = 'file-control-cmd-secret-4e2';
const BODY = JSON.stringify({ item: 'from the sandbox', n: 42 });

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

describe.skipIf(!docker.ok || !keychain.ok)('a secret defined as a host command: fetched on first use, refreshed on a 401 (real CLI, Docker, gateway)', () => {
  let home: string;
  let project: string;
  let tools: string;
  let counter: string;
  let upstream: FakeUpstream;
  let server: https.Server;
  let port = 0;
  let caPem = '';
  const served: Array<{ url: string; authorization: string; body: string; runs: number }> = [];
  const printed: string[] = [];
  const runs = async () => Number((await readFile(counter, 'utf8').catch(() => '0')).trim());

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
        resolve: async (h) => {
          if (h !== HOST) throw new Error(`ENOTFOUND ${h}`);
          return ['127.0.0.1'];
        },
        [ALLOW_LOOPBACK_TARGETS_FOR_TESTS]: true,
        upstreamCa: [caPem],
      },
    };
    const code = await main(args, io);
    printed.push(out, err);
    return { code, out, err };
  }

  beforeAll(async () => {
    home = await mkdtemp(path.join(os.tmpdir(), 'airlock-cmdsecret-home-'));
    project = await mkdtemp(path.join(os.tmpdir(), 'airlock-cmdsecret-project-'));
    tools = await mkdtemp(path.join(os.tmpdir(), 'airlock-cmdsecret-tools-'));
    counter = path.join(tools, 'count');
    await writeFile(path.join(project, 'search.cjs'), `${SEARCH_SCRIPT}\n`);
    await writeFile(path.join(project, 'control.txt'), `${FILE_CONTROL}\n`);
    await writeFile(path.join(project, 'body.json'), BODY);
    await exec('bash', ['-c', 'git init -q -b main && git add -A && git -c user.email=t@t.invalid -c user.name=t commit -qm init'], { cwd: project });
    // The host command: counts its runs, prints tok_SALT_N with blanks around, and the token on stderr too.
    const script = path.join(tools, 'token.sh');
    await writeFile(script, `#!/bin/sh\nn=$(( $(cat "$1" 2>/dev/null || echo 0) + 1 ))\necho "$n" > "$1"\necho "debug tok_$2_$n" >&2\nprintf '  tok_%s_%s\\n' "$2" "$n"\n`);
    await chmod(script, 0o755);

    const ca = await RunCa.create('cmd-secret-server');
    caPem = ca.certificatePem;
    server = https.createServer({ key: ca.leafKeyPem, cert: await ca.leafFor(HOST) }, (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => void (async () => {
        const authorization = req.headers.authorization ?? '';
        served.push({ url: req.url ?? '', authorization, body: Buffer.concat(chunks).toString(), runs: await runs() });
        if (authorization !== `Bearer ${token(2)}`) {
          res.writeHead(401, { 'WWW-Authenticate': 'Bearer' });
          res.end(`token expired: ${authorization}\n`);
        } else res.end(`created ${Buffer.concat(chunks).length} bytes\n`);
      })());
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as net.AddressInfo).port;

    upstream = await startFakeUpstream({ expectedKey: CANARY_KEY });
    await new ProviderCatalog({ home }).setBaseUrl('anthropic', upstream.url);
    // Not *_TOKEN: the built-in agent's commands do not get variables named like a secret (command-env.ts).
    const set = await airlock(['secrets', 'set', SECRET, '--host', HOST, '--form', 'bearer', '--env', 'API_AUTH', '--command', `${script} ${counter} ${SALT}`]);
    expect(set.code, set.err).toBe(0);
    expect(await runs()).toBe(0);
  }, 120_000);

  afterAll(async () => {
    await airlock(['secrets', 'rm', SECRET]).catch(() => undefined);
    server?.closeAllConnections();
    await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
    await upstream?.close();
    for (const dir of [home, project, tools]) if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('the command runs once before the 401 and once after; the same body goes again; the tokens are nowhere but the server', async () => {
    const controls = [enc('HTTPS_PROXY=http://127.0.0.1:'), enc(FILE_CONTROL), enc(token(1)), enc(token(2))].join(' ');
    upstream.setScript([
      { toolCalls: [{ name: 'run_command', input: { command: `curl -sS -X POST -H "Authorization: Bearer $API_AUTH" -H 'Content-Type: application/json' --data-binary @body.json https://${HOST}:${port}/v1/items -w '[http %{http_code}]' 2>&1` } }] },
      { toolCalls: [{ name: 'run_command', input: { command: `node -e "$(cat search.cjs)" ${controls}` } }] },
      { toolCalls: [{ name: 'finish', input: { summary: 'posted' } }] },
    ]);
    const from = upstream.requests.length;
    const run = await airlock(['run', project, '--task', 'post an item', '--provider', 'anthropic', '--key-env', 'AIRLOCK_TEST_KEY', '--network', 'allowlist', '--allow', `${HOST}:${port}`, '--secret', SECRET, '--json']);
    expect(run.code, run.err).toBe(0);
    const told = JSON.stringify(upstream.requests.slice(from).map((r) => r.body));
    expect(told).toContain(`created ${BODY.length} bytes`);
    expect(told).toContain('[http 200]');

    // Not run when the run started; once when the first request needed it (answered 401), once after.
    expect(served.map((s) => [s.url, s.authorization, s.runs])).toEqual([
      ['/v1/items', `Bearer ${token(1)}`, 1],
      ['/v1/items', `Bearer ${token(2)}`, 2],
    ]);
    expect(served.map((s) => s.body)).toEqual([BODY, BODY]);
    expect(await runs()).toBe(2);

    // The sandbox: processes, command lines and every writable mount (the controls prove the search ran).
    const found = JSON.parse(/\{"files".*?"mounts":\[[^\]]*\]\}/.exec(told.replace(/\\"/g, '"'))?.[0] ?? '{}') as { hits?: string[]; control?: { environ: boolean; file: boolean }; files?: number };
    expect(found.control).toEqual({ environ: true, file: true });
    expect(found.hits).toEqual([]);

    // The audit says the secret was fetched (first use, then after the 401), by name; the request was sent again.
    const audits = (await filesHolding(home, '"secretFetch"')).filter((f) => f.endsWith('audit.jsonl'));
    expect(audits.length).toBe(1);
    const records = (await readFile(audits[0] as string, 'utf8')).split('\n').filter(Boolean).map((l) => JSON.parse(l) as { data?: { secretFetch?: { secret: string; trigger: string; ok: boolean }; reason?: string; secret?: string; status?: number } });
    expect(records.flatMap((r) => (r.data?.secretFetch ? [[r.data.secretFetch.secret, r.data.secretFetch.trigger, r.data.secretFetch.ok]] : []))).toEqual([
      [SECRET, 'first use', true],
      [SECRET, '401', true],
    ]);
    expect(records.some((r) => r.data?.secret === SECRET && r.data.status === 200 && r.data.reason?.includes('sent again after a 401'))).toBe(true);

    // Airlock's records (its whole home: runs, events, audit, settings) and everything printed.
    for (const t of [token(1), token(2)]) {
      expect(await filesHolding(home, t)).toEqual([]);
      expect(printed.join('\n')).not.toContain(t);
      expect(told).not.toContain(t);
    }
    // The command line (it names the salt) is in the secrets file, by design; the sandbox never saw it.
    expect(told).not.toContain(SALT);
  }, 300_000);
});
