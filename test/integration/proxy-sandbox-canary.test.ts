/**
 * The promise of docs/architecture.md §2.1, end to end: a distinctive canary key stored in the real keychain
 * pays for calls made with curl from inside a hardened `--network none` sandbox (the proxy reached
 * through the channel), and afterwards the key is found nowhere a leak could land. Every search has
 * a positive control, so a search that could not run fails the test instead of passing it.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChannelClient } from '../../core/channel/channel-client';
import { KeyVault } from '../../core/keys/key-vault';
import { ProviderCatalog } from '../../core/keys/provider-catalog';
import { ModelProxy, proxyEnvFor, vaultResolver, type ModelCallEvent } from '../../core/proxy/model-proxy';
import { DockerDriver } from '../../core/sandbox/docker/docker-driver';
import { DEFAULT_LIMITS } from '../../core/sandbox/driver';
import { startFakeUpstream, type FakeUpstream } from '../fixtures/fake-upstream';
import { requirePrerequisite, type PrerequisiteStatus } from '../support/prerequisites';
import { SANDBOX_VARIANTS, sandboxImage, type SandboxVariant, testEngine } from './sandbox-support';
import { enc, SEARCH_SCRIPT } from '../support/sandbox-search';

const docker = await requirePrerequisite('docker');
const keychain = docker.ok ? await requirePrerequisite('keychain') : docker;
const available = new Map<string, PrerequisiteStatus>();
for (const v of SANDBOX_VARIANTS) available.set(v.name, v.prerequisite === 'docker' ? docker : await requirePrerequisite(v.prerequisite));

/** Runs a host command and feeds its stdout through `onChunk`; resolves with the exit code (and stderr's tail when it failed). */
function hostCommand(cmd: string, args: string[], onChunk: (b: Buffer) => void): Promise<number | string | null> {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    p.stdout.on('data', onChunk);
    p.stderr.on('data', (c: Buffer) => (stderr = (stderr + c.toString()).slice(-2000)));
    p.on('error', reject);
    p.on('close', (code) => resolve(code === 0 ? 0 : `${code}: ${stderr.trim()}`));
  });
}

/** Counts occurrences of `needle` in a byte stream, across chunk boundaries. */
function streamMatcher(needles: Buffer[]): { push(b: Buffer): void; hits: number[]; bytes: number } {
  const keep = Math.max(...needles.map((n) => n.length)) - 1;
  let tail = Buffer.alloc(0);
  const state = { hits: needles.map(() => 0), bytes: 0, push(b: Buffer) {
    state.bytes += b.length;
    const buf = Buffer.concat([tail, b]);
    needles.forEach((n, i) => {
      let at = buf.indexOf(n);
      while (at >= 0) {
        // Count only matches that end in the new bytes (the tail was already searched).
        if (at + n.length > tail.length) state.hits[i]! += 1;
        at = buf.indexOf(n, at + 1);
      }
    });
    tail = buf.subarray(Math.max(0, buf.length - keep));
  } };
  return state;
}


// Under every way a sandbox runs: runc and gVisor on Docker, runc on Podman (sandbox-support.ts).
for (const variant of SANDBOX_VARIANTS) canarySuite(variant);

function canarySuite(variant: SandboxVariant): void {
describe.skipIf(!available.get(variant.name)?.ok || !keychain.ok)(`canary key through a hardened sandbox: ${variant.name}`, () => {
  // The engine's own CLI inspects from the host (Podman's reads the same storage as its API service).
  const cli = variant.name === 'podman' ? 'podman' : 'docker';
  const CANARY = `sk-ant-canary-${randomBytes(20).toString('hex')}`;
  const service = `airlock-test-${randomBytes(4).toString('hex')}`;
  const runId = `canary-${randomBytes(4).toString('hex')}`;
  let driver: DockerDriver;
  let home: string;
  let up: FakeUpstream;
  let vault: KeyVault;
  let proxy: ModelProxy;
  let client: ChannelClient;
  let sandboxId = '';
  let imageRef = '';
  let env: Record<string, string> = {};
  const events: ModelCallEvent[] = [];
  const outputs: string[] = [];

  beforeAll(async () => {
    home = await mkdtemp(path.join(os.tmpdir(), 'airlock-canary-'));
    up = await startFakeUpstream({ expectedKey: CANARY });
    const catalog = new ProviderCatalog({ home });
    await catalog.setBaseUrl('anthropic', up.url);
    await catalog.setBaseUrl('openai', `${up.url}/v1`);
    vault = new KeyVault(catalog, { service });
    await vault.set('anthropic', CANARY);
    await vault.set('openai', CANARY);
    proxy = new ModelProxy({ resolveUpstream: vaultResolver(catalog, vault) });
    proxy.onDidCall((e) => events.push(e));
    const { port: proxyPort } = await proxy.start();

    const engine = await variant.engine();
    driver = new DockerDriver({ env: process.env, isolation: variant.isolation, engine: engine ?? testEngine() });
    imageRef = await sandboxImage(engine);
    sandboxId = (await driver.create({ runId, image: imageRef, limits: DEFAULT_LIMITS, network: 'none' })).id;
    client = await ChannelClient.connect(await driver.openChannel(sandboxId));
    const grant = proxy.issueToken({ runId, providers: ['anthropic', 'openai'] });
    const exposed = await client.exposeHostService(0, () => connect(proxyPort, '127.0.0.1'));
    env = proxyEnvFor(exposed.port, grant.token);
  });

  afterAll(async () => {
    client?.dispose();
    if (sandboxId) await driver.destroy(runId);
    await vault?.remove('anthropic').catch(() => undefined);
    await vault?.remove('openai').catch(() => undefined);
    vault?.dispose();
    await proxy?.stop();
    await up?.close();
    if (home) await rm(home, { recursive: true, force: true });
  });

  it('curl inside the sandbox calls both formats through the proxy; the upstream saw the key, the sandbox only the token', async () => {
    up.setScript([{ text: 'hello from the fake claude' }, { text: 'hello from the fake gpt' }]);
    const anthropic = await client.run({
      argv: ['sh', '-c', `curl -sS --max-time 30 "$ANTHROPIC_BASE_URL/v1/messages?beta=true" -H "x-api-key: $ANTHROPIC_API_KEY" -H 'anthropic-version: 2023-06-01' -H 'content-type: application/json' -d '{"model":"claude-sonnet-4-5","max_tokens":20,"messages":[{"role":"user","content":"hi"}]}'`],
      env,
      timeoutMs: 60_000,
    });
    outputs.push(anthropic.stdout.toString(), anthropic.stderr.toString());
    expect(anthropic.exitCode, anthropic.stderr.toString()).toBe(0);
    expect(JSON.parse(anthropic.stdout.toString())).toMatchObject({ content: [{ type: 'text', text: 'hello from the fake claude' }] });

    const openai = await client.run({
      argv: ['sh', '-c', `curl -sS -N --max-time 30 "$OPENAI_BASE_URL/chat/completions" -H "Authorization: Bearer $OPENAI_API_KEY" -H 'content-type: application/json' -d '{"model":"gpt-5","stream":true,"messages":[{"role":"user","content":"hi"}]}'`],
      env,
      timeoutMs: 60_000,
    });
    outputs.push(openai.stdout.toString(), openai.stderr.toString());
    expect(openai.exitCode, openai.stderr.toString()).toBe(0);
    expect(openai.stdout.toString()).toContain('data: [DONE]');
    const text = openai.stdout
      .toString()
      .split('\n')
      .filter((l) => l.startsWith('data: {'))
      .map((l) => (JSON.parse(l.slice(6)) as { choices: { delta?: { content?: string } }[] }).choices[0]?.delta?.content ?? '')
      .join('');
    expect(text).toBe('hello from the fake gpt');

    const [a, o] = up.requests.slice(-2);
    expect(a?.headers['x-api-key']).toBe(CANARY);
    expect(o?.headers.authorization).toBe(`Bearer ${CANARY}`);
    expect(events.filter((e) => e.runId === runId).map((e) => [e.provider, e.status, e.stream])).toEqual([
      ['anthropic', 200, false],
      ['openai', 200, true],
    ]);
    expect(proxy.usage(runId).requests).toBe(2);
  }, 300_000);

  it('the canary is nowhere: /proc/*/environ, /proc/*/cmdline, every file, docker inspect, the image, outputs, events', async () => {
    // Positive controls: the run token IS in the search process's environment, and a marker file IS on disk.
    const fileControl = `control-${randomBytes(8).toString('hex')}`;
    const write = await client.run({ argv: ['sh', '-c', 'printf %s "$0" > /home/airlock/control.txt', fileControl] });
    expect(write.exitCode).toBe(0);
    const search = await client.run({
      argv: ['node', '-e', SEARCH_SCRIPT, enc(env.OPENAI_API_KEY!), enc(fileControl), enc(CANARY)],
      env,
      timeoutMs: 170_000,
      maxOutputBytes: 1 << 20,
    });
    expect(search.exitCode, search.stderr.toString()).toBe(0);
    const inside = JSON.parse(search.stdout.toString()) as { mounts: string[]; files: number; bytes: number; environs: number; cmdlines: number; hits: string[]; control: { environ: boolean; file: boolean } };
    console.log(`[canary] inside (${inside.mounts.join(' ')}): ${inside.files} files / ${(inside.bytes / 1e6).toFixed(0)} MB, ${inside.environs} environs, ${inside.cmdlines} cmdlines searched`);
    expect(inside.control).toEqual({ environ: true, file: true });
    expect(inside.mounts).toEqual(expect.arrayContaining(['/tmp', '/home/airlock', '/workspace']));
    expect(inside.files).toBeGreaterThan(0);
    expect(inside.environs).toBeGreaterThan(0);
    expect(inside.hits).toEqual([]);

    // From the host: the container's whole filesystem (every file, whatever its owner), its config, the image.
    const needles = [Buffer.from(CANARY), Buffer.from('/opt/airlock')];
    const exported = streamMatcher(needles);
    // Through the engine's API (`podman export` cannot write to a pipe it did not get as a tty or file).
    const tar = await (await driver.engine()).docker.getContainer(sandboxId).export();
    for await (const chunk of tar) exported.push(chunk as Buffer);
    expect(exported.bytes).toBeGreaterThan(10_000_000);
    expect(exported.hits[1]).toBeGreaterThan(0); // control: the helper path is in the image's files
    expect(exported.hits[0]).toBe(0);
    for (const args of [['inspect', sandboxId], ['image', 'inspect', imageRef], ['image', 'history', '--no-trunc', imageRef]]) {
      const m = streamMatcher([Buffer.from(CANARY), Buffer.from(args[0] === 'inspect' ? env.OPENAI_API_KEY!.slice(0, 8) : 'airlock')]);
      expect(await hostCommand(cli, args, (b) => m.push(b))).toBe(0);
      expect(m.bytes).toBeGreaterThan(0);
      expect(m.hits[0], `canary in ${cli} ${args.join(' ')}`).toBe(0);
    }

    // What left the proxy toward the sandbox and toward the app.
    for (const text of outputs) expect(text).not.toContain(CANARY);
    expect(JSON.stringify(events)).not.toContain(CANARY);
    expect(JSON.stringify(await vault.list())).not.toContain(CANARY);
    expect(JSON.stringify(proxy.usage(runId))).not.toContain(CANARY);
  }, 600_000);

  it('after the run is revoked, the token no longer works from inside', async () => {
    proxy.revokeRun(runId);
    const r = await client.run({
      argv: ['sh', '-c', `curl -sS -o /dev/null -w '%{http_code}' "$OPENAI_BASE_URL/models" -H "Authorization: Bearer $OPENAI_API_KEY"`],
      env,
      timeoutMs: 60_000,
    });
    expect(r.stdout.toString()).toBe('401');
  });
});
}
