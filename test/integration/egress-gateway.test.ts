/**
 * The egress gateway against a live hardened Docker sandbox: git clone and push over HTTPS to git's
 * own `http-backend`, and `npm install` from a token-protected registry, with the token only in the
 * OS keychain. Every byte stays on this machine: the test server listens on 127.0.0.1 under made-up
 * `.test` names that only the gateway's injected test resolver knows; its CA is passed explicitly.
 */
import { randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALLOW_LOOPBACK_TARGETS_FOR_TESTS, type EgressEvent } from '../../core/network/egress-proxy';
import { presetBinding, SecretStore } from '../../core/network/gateway/secret-store';
import { applyNetworkPolicy, type AppliedNetworkPolicy, type NetworkPolicy } from '../../core/network/network-policy';
import { DockerDriver } from '../../core/sandbox/docker/docker-driver';
import { DEFAULT_LIMITS } from '../../core/sandbox/driver';
import { ensureSandboxImage } from '../../core/sandbox/image';
import { SandboxManager, type Sandbox } from '../../core/sandbox/sandbox';
import { GIT_HOST, OTHER_HOST, PRIVATE_PACKAGE, REGISTRY_HOST, startGitHttpsServer, type GitHttpsServer } from '../support/git-https-server';
import { requirePrerequisite } from '../support/prerequisites';
import { testEngine } from './sandbox-support';

const docker = await requirePrerequisite('docker');
const keychain = await requirePrerequisite('keychain');
const exec = promisify(execFile);

// Made at run time, so the source holds no copy a search could trip over.
const TOKEN = `ghp_${randomBytes(18).toString('hex')}`;

/** Searches process environments, command lines and the writable files of the sandbox for the token. */
const SEARCH = `
const fs = require('fs'), path = require('path');
const needle = Buffer.from(process.env.NEEDLE_REVERSED.split('').reverse().join(''));
delete process.env.NEEDLE_REVERSED;
const hits = [];
for (const pid of fs.readdirSync('/proc').filter((p) => /^\\d+$/.test(p))) {
  for (const f of ['environ', 'cmdline']) {
    try { if (fs.readFileSync('/proc/' + pid + '/' + f).includes(needle)) hits.push('/proc/' + pid + '/' + f); } catch {}
  }
}
const walk = (dir, depth) => {
  let entries = [];
  try { entries = fs.readdirSync(dir, { withFileTypes: true }); } catch { return; }
  for (const e of entries) {
    const p = path.join(dir, e.name);
    if (e.isDirectory() && depth < 12) walk(p, depth + 1);
    else if (e.isFile()) { try { const s = fs.statSync(p); if (s.size < 64 * 1024 * 1024 && fs.readFileSync(p).includes(needle)) hits.push(p); } catch {} }
  }
};
for (const d of ['/tmp', '/home', '/workspace', '/var/tmp', '/run', '/etc']) walk(d, 0);
console.log(JSON.stringify({ hits, procs: fs.readdirSync('/proc').filter((p) => /^\\d+$/.test(p)).length }));
`;

describe.skipIf(!docker.ok || !keychain.ok)('egress gateway in a Docker sandbox (git and npm over intercepted HTTPS)', () => {
  const manager = new SandboxManager(new DockerDriver({ env: process.env, engine: testEngine() }));
  let sandbox: Sandbox;
  let server: GitHttpsServer;
  let home: string;
  let secrets: SecretStore;
  let policy: AppliedNetworkPolicy | undefined;
  const events: EgressEvent[] = [];
  const outputs: string[] = [];
  const service = `airlock-test-egress-${randomBytes(4).toString('hex')}`;

  const apply = async (extra: Partial<Extract<NetworkPolicy, { mode: 'allowlist' }>>) => {
    await policy?.close();
    const port = server.port;
    policy = await applyNetworkPolicy(
      sandbox,
      { mode: 'allowlist', allow: [`${GIT_HOST}:${port}`, `${REGISTRY_HOST}:${port}`, `${OTHER_HOST}:${port}`], ...extra },
      {
        presetContext: { env: process.env },
        sandboxNetwork: 'none',
        secrets: await secrets.resolve(['gh', 'registry']),
        upstreamCa: [server.caPem],
        proxyOptions: { resolve: async () => ['127.0.0.1'], [ALLOW_LOOPBACK_TARGETS_FOR_TESTS]: true },
      },
    );
    policy.onDidConnect((e) => events.push(e));
    return policy;
  };
  const sh = async (script: string, timeoutMs = 120_000) => {
    const r = await sandbox.channel.run({ argv: ['bash', '-c', script], env: policy!.env, timeoutMs });
    const out = r.stdout.toString() + r.stderr.toString();
    outputs.push(out);
    return { code: r.exitCode, out };
  };

  beforeAll(async () => {
    const { ref: image } = await ensureSandboxImage({ env: process.env, engine: testEngine() });
    server = await startGitHttpsServer(TOKEN);
    home = await mkdtemp(path.join(os.tmpdir(), 'airlock-egress-home-'));
    secrets = new SecretStore({ home, service });
    await secrets.set(presetBinding('github', 'gh', GIT_HOST), TOKEN);
    await secrets.set(presetBinding('npm', 'registry', REGISTRY_HOST), TOKEN);
    sandbox = await manager.create({ runId: `egress-${randomBytes(4).toString('hex')}`, image, limits: DEFAULT_LIMITS, network: 'none' });
  }, 180_000);

  afterAll(async () => {
    await policy?.close();
    const proofs = await manager.shutdown();
    for (const p of proofs) expect(p.leftovers).toEqual([]);
    await secrets?.remove('gh');
    await secrets?.remove('registry');
    await server?.close();
    if (home) await rm(home, { recursive: true, force: true });
  });

  it('git clone and push through the gateway, the token only in the keychain and found nowhere', async () => {
    await apply({});
    const url = `https://${GIT_HOST}:${server.port}/proj.git`;
    const clone = await sh(`git clone ${url} /tmp/w && cd /tmp/w && git log --oneline`);
    expect(clone.out).toContain('seed');
    expect(clone.code).toBe(0);
    const push = await sh(`cd /tmp/w && echo change > file.txt && git add . && git -c user.name=a -c user.email=a@a commit -qm change && git push origin HEAD:refs/heads/agent/one`);
    expect(push.code, push.out).toBe(0);
    const { stdout } = await exec('git', ['--git-dir', server.bareRepo, 'log', '--format=%s', 'agent/one']);
    expect(stdout.trim().split('\n')[0]).toBe('change');
    // The server saw the real token (the gateway swapped it in), and git saw only the placeholder.
    expect(server.requests.filter((r) => r.host === GIT_HOST && r.authorized).length).toBeGreaterThan(0);
    expect(policy!.env.GH_TOKEN).toMatch(/^airlock-placeholder-gh-/);
    expect(policy!.record.gateway).toMatchObject({ secrets: ['gh', 'registry'] });

    // Audited by name, per request, with the push's path.
    const pushed = events.find((e) => e.intercepted && e.method === 'POST' && e.path?.endsWith('/git-receive-pack'));
    expect(pushed).toMatchObject({ host: GIT_HOST, status: 200, secret: 'gh', allowed: true });

    // The token is nowhere in the live sandbox (processes, command lines, files), the records or the output.
    const keep = sandbox.channel.spawn({ argv: ['sleep', '30'], env: policy!.env });
    const reversed = TOKEN.split('').reverse().join('');
    const search = await sandbox.channel.run({ argv: ['node', '-e', SEARCH], env: { ...policy!.env, NEEDLE_REVERSED: reversed } });
    const found = JSON.parse(search.stdout.toString()) as { hits: string[]; procs: number };
    expect(found.procs).toBeGreaterThan(2);
    expect(found.hits).toEqual([]);
    keep.kill();
    const records = JSON.stringify({ events, record: policy!.record, env: policy!.env });
    expect(records).not.toContain(TOKEN);
    expect(outputs.join('\n')).not.toContain(TOKEN);
    const listed = JSON.stringify(await secrets.list());
    expect(listed).not.toContain(TOKEN);
  }, 240_000);

  it('the placeholder aimed at another host is refused and audited', async () => {
    // A host is seen only when it is intercepted (a rule names it); a plain tunnel carries the
    // worthless placeholder unseen (docs/architecture.md §2.8).
    await apply({ rules: [`${OTHER_HOST} allow GET`] });
    const r = await sh(`curl -sS -H "Authorization: Bearer $GH_TOKEN" https://${OTHER_HOST}:${server.port}/`);
    expect(r.out).toContain(`the placeholder of secret "gh" was sent to ${OTHER_HOST}, which it is not bound to`);
    expect(server.requests.some((q) => q.host === OTHER_HOST)).toBe(false);
    expect(events.find((e) => e.host === OTHER_HOST && e.intercepted)).toMatchObject({ allowed: false, status: 403, secret: 'gh' });
  }, 60_000);

  it('a read-only rule lets the clone through and refuses the push with the readable 403', async () => {
    await apply({ rules: [`${GIT_HOST} read-only`] });
    const url = `https://${GIT_HOST}:${server.port}/proj.git`;
    const clone = await sh(`rm -rf /tmp/ro && git clone ${url} /tmp/ro`);
    expect(clone.code, clone.out).toBe(0);
    const before = server.requests.length;
    const push = await sh(`cd /tmp/ro && echo x > y && git add . && git -c user.name=a -c user.email=a@a commit -qm ro && git push origin HEAD:refs/heads/agent/two`);
    expect(push.code).not.toBe(0);
    expect(push.out).toContain(`refused — git push is refused (read-only) (rule: ${GIT_HOST} read-only)`);
    expect(push.out).toContain('403');
    expect(server.requests.slice(before).some((q) => q.url.includes('receive-pack'))).toBe(false);
    await expect(exec('git', ['--git-dir', server.bareRepo, 'rev-parse', '--verify', 'refs/heads/agent/two'])).rejects.toThrow();
  }, 180_000);

  it('a push prefix admits branches under it and refuses others', async () => {
    await apply({ rules: [`${GIT_HOST} git-push=agent/`] });
    const ok = await sh(`cd /tmp/w && git push origin HEAD:refs/heads/agent/three`);
    expect(ok.code, ok.out).toBe(0);
    const bad = await sh(`cd /tmp/w && git push origin HEAD:refs/heads/main`);
    expect(bad.code).not.toBe(0);
    expect(bad.out).toMatch(/\[remote rejected\] HEAD -> main \(push to refs\/heads\/main is outside refs\/heads\/agent\//);
    const { stdout } = await exec('git', ['--git-dir', server.bareRepo, 'log', '--format=%s', '-1', 'main']);
    expect(stdout.trim()).toBe('seed');
  }, 180_000);

  it('npm install from a token-protected registry, the token only in the keychain', async () => {
    await apply({});
    const { name, version } = PRIVATE_PACKAGE;
    const r = await sh(`npm install ${name} --registry https://${REGISTRY_HOST}:${server.port}/ --prefix /tmp/np --cache /tmp/npm-cache --no-audit --no-fund --no-update-notifier`, 180_000);
    expect(r.code, r.out).toBe(0);
    const pkg = JSON.parse((await sandbox.channel.readFile(`/tmp/np/node_modules/${name}/package.json`)).toString()) as { version: string };
    expect(pkg.version).toBe(version);
    expect(server.requests.filter((q) => q.host === REGISTRY_HOST).every((q) => q.authorized)).toBe(true);
    expect(events.find((e) => e.host === REGISTRY_HOST && e.intercepted)).toMatchObject({ secret: 'registry', status: 200 });
    const npmrc = (await sandbox.channel.readFile('/tmp/.airlock-egress/npmrc')).toString();
    expect(npmrc).toContain(policy!.env.NPM_TOKEN);
    expect(npmrc).not.toContain(TOKEN);
    expect(outputs.join('\n')).not.toContain(TOKEN);
  }, 240_000);
});
