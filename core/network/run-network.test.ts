/**
 * A run's chosen secrets and rules, from the keychain (a test service of its own) to what the
 * sandbox gets: placeholders and the run CA's certificate only — never a value or a private key.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { requirePrerequisite } from '../../test/support/prerequisites';
import type { Sandbox } from '../sandbox/sandbox';
import { presetBinding, SecretStore } from './gateway/secret-store';
import { applyRunNetwork, parseRunNetworkPolicy } from './run-network';

const keychain = await requirePrerequisite('keychain');
const LO_ONLY_DEV = 'Inter-|   Receive\n face |bytes\n    lo: 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n';
const ROUTE_EMPTY = 'Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n';
const homes: string[] = [];
afterAll(async () => {
  for (const h of homes) await rm(h, { recursive: true, force: true });
});

describe('run network with gateway secrets and rules', () => {
  it('parses rules into the policy', () => {
    expect(parseRunNetworkPolicy('allowlist', ['github.com', 'preset:npm'], ['github.com git-fetch'])).toMatchObject({ mode: 'allowlist', presets: ['npm'], allow: ['github.com'], rules: ['github.com git-fetch'] });
  });

  it.skipIf(!keychain.ok)('the sandbox gets placeholders, a git helper and the CA certificate; no value, no private key', async () => {
    const home = await mkdtemp(path.join(os.tmpdir(), 'airlock-runnet-'));
    homes.push(home);
    const service = `airlock-test-runnet-${randomBytes(4).toString('hex')}`;
    const store = new SecretStore({ home, service });
    const value = `ghp_${randomBytes(16).toString('hex')}`;
    await store.set(presetBinding('github', 'gh'), value);
    const written = new Map<string, string>();
    const sandbox = {
      runId: 'run-net-test',
      channel: {
        readFile: async (p: string) => Buffer.from(p === '/proc/net/dev' ? LO_ONLY_DEV : p === '/proc/net/route' ? ROUTE_EMPTY : '# system roots\n'),
        writeFile: async (p: string, data: Buffer | string) => void written.set(p, data.toString()),
        exposeHostService: async () => ({ port: 40000, dispose: () => undefined }),
      },
    } as unknown as Sandbox;
    try {
      const net = await applyRunNetwork(sandbox, { runId: 'run-net-test', policy: 'allowlist', allowlist: ['github.com'], egressRules: ['github.com git-push=agent/'], secrets: ['gh'], projectDir: home }, { home, keychainService: service, env: process.env });
      expect(net.env.GH_TOKEN).toMatch(/^airlock-placeholder-gh-[0-9a-f]{32}$/);
      expect(net.env.GITHUB_TOKEN).toBe(net.env.GH_TOKEN);
      expect(net.env.GIT_CONFIG_KEY_1).toBe('credential.https://github.com.helper');
      expect(net.env.GIT_CONFIG_VALUE_1).toContain(net.env.GH_TOKEN);
      expect(net.env).toMatchObject({ NODE_EXTRA_CA_CERTS: '/tmp/.airlock-egress/run-ca.pem', SSL_CERT_FILE: '/tmp/.airlock-egress/ca-bundle.pem', GIT_SSL_CAINFO: '/tmp/.airlock-egress/ca-bundle.pem', REQUESTS_CA_BUNDLE: '/tmp/.airlock-egress/ca-bundle.pem', CURL_CA_BUNDLE: '/tmp/.airlock-egress/ca-bundle.pem' });
      expect(written.get('/tmp/.airlock-egress/run-ca.pem')).toMatch(/^-----BEGIN CERTIFICATE-----/);
      expect(written.get('/tmp/.airlock-egress/ca-bundle.pem')).toMatch(/^# system roots\n-----BEGIN CERTIFICATE-----/);
      expect(net.record).toMatchObject({ gateway: { rules: ['github.com git-push=agent/'], secrets: ['gh'] } });
      const everything = JSON.stringify({ env: net.env, record: net.record, files: [...written] });
      expect(everything).not.toContain(value);
      expect(everything).not.toMatch(/PRIVATE KEY/);
      net.dispose();
      await expect(applyRunNetwork(sandbox, { runId: 'r2', policy: 'allowlist', allowlist: ['github.com'], secrets: ['nope'], projectDir: home }, { home, keychainService: service, env: process.env })).rejects.toMatchObject({ kind: 'NOT_FOUND' });
    } finally {
      await store.remove('gh');
    }
  });
});
