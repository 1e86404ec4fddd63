import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OsKeychainBackend } from '../../core/keys/keychain-backend';
import { McpServerRegistry } from '../../core/network/mcp-gateway/mcp-server-registry';
import { openRunMcpGateway, SCRUBBED } from '../../core/network/mcp-gateway/run-mcp-gateway';
import { startOAuthMcpServer, type OAuthMcpServer } from '../support/oauth-mcp-server';
import { requirePrerequisite } from '../support/prerequisites';

/**
 * OAuth sign-in for a remote MCP server (docs/architecture.md §20, "OAuth"), with the real keychain
 * and a real authorization server and MCP server on loopback (the official SDK's): the CLI prints
 * the sign-in page, the "browser" (a plain HTTP client following the redirect) comes back to the
 * CLI's loopback callback, the tokens land in the keychain and nowhere in Airlock's files; a run's
 * gateway uses them, refreshes a stale one on the host, and scrubs both from what it passes on.
 */

const keychain = await requirePrerequisite('keychain');
const cli = fileURLToPath(new URL('../../bin/airlock.js', import.meta.url));

describe.skipIf(!keychain.ok)('MCP servers signed in with OAuth: tokens in the keychain, refreshed on the host, never passed on', () => {
  let home: string;
  let service: string;
  let server: OAuthMcpServer;

  beforeAll(async () => {
    home = await mkdtemp(path.join(os.tmpdir(), 'airlock-mcp-oauth-'));
    service = `airlock-test-mcp-oauth-${randomBytes(4).toString('hex')}`;
    server = await startOAuthMcpServer();
  });
  afterAll(async () => {
    await new OsKeychainBackend(service).delete('mcp-server:docs').catch(() => false);
    await server?.close();
    await rm(home, { recursive: true, force: true });
  });

  /** `airlock mcp-servers …`; `browse` is called with each sign-in URL the CLI prints. */
  function airlock(args: string[], browse?: (url: string) => Promise<void>): Promise<{ code: number; stdout: string; stderr: string }> {
    return new Promise((resolve) => {
      const child = spawn(process.execPath, [cli, ...args], { env: { ...process.env, AIRLOCK_HOME: home, AIRLOCK_KEYCHAIN_SERVICE: service }, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => {
        stdout += d.toString();
        const url = /^ {2}(http:\/\/127\.0\.0\.1:\d+\/authorize\?\S+)$/m.exec(stdout)?.[1];
        if (url && browse) {
          const go = browse;
          browse = undefined;
          void go(url);
        }
      });
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('close', (code) => resolve({ code: code ?? 1, stdout, stderr }));
    });
  }

  /** What a browser does on a sign-in page that approves at once: follow the redirect to the callback. */
  async function approve(url: string): Promise<void> {
    const res = await fetch(url, { redirect: 'manual' });
    const callback = res.headers.get('location');
    expect(callback).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/callback\?code=/);
    expect((await fetch(callback as string)).status).toBe(200);
  }

  it('signs in through the CLI and keeps the tokens in the keychain only', async () => {
    const registry = new McpServerRegistry({ home, service });
    await expect(registry.add({ name: 'docs', url: server.url, auth: { type: 'oauth' } })).resolves.toMatchObject({ auth: { type: 'oauth' } });
    // Before sign-in a run cannot use it, and says how to fix that.
    await expect(registry.resolve(['docs'])).rejects.toThrow(/airlock mcp-servers login docs/);

    const login = await airlock(['mcp-servers', 'login', 'docs', '--no-browser'], approve);
    expect(login.code, login.stderr).toBe(0);
    expect(login.stdout).toContain('signed in to docs');
    expect(server.issued).toHaveLength(1);
    const token = server.issued[0] as string;
    const stored = await new OsKeychainBackend(service).get('mcp-server:docs');
    expect(stored).toContain(token);
    // Nowhere else: not in Airlock's files, not in what the CLI printed.
    expect(await readFile(path.join(home, 'mcp-servers.json'), 'utf8')).not.toContain(token);
    expect(login.stdout + login.stderr).not.toContain(token);
    expect((await registry.list()).find((s) => s.name === 'docs')?.hasCredential).toBe(true);
  });

  it("a run's gateway calls the server with the token, refreshes a stale one on the host, and scrubs both", async () => {
    const registry = new McpServerRegistry({ home, service });
    server.expireAccessTokens(); // the signed-in token went stale: the gateway must refresh it
    const gateway = await openRunMcpGateway({ runId: 'run-oauth-test', servers: await registry.resolve(['docs']) });
    const client = new Client({ name: 'test-agent', version: '1.0.0' });
    try {
      expect(server.refreshes).toBe(1);
      const fresh = server.issued.at(-1) as string;
      expect(await new OsKeychainBackend(service).get('mcp-server:docs')).toContain(fresh);
      await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${gateway.port}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${gateway.token}` } } }));
      const result = JSON.stringify(await client.callTool({ name: 'docs__whoami', arguments: {} }));
      // The server echoed the token it was sent; the agent sees the scrubbed stand-in, never a token.
      expect(result).toContain(SCRUBBED);
      for (const t of server.issued) expect(result).not.toContain(t);
    } finally {
      await client.close();
      gateway.dispose();
    }
  });

  it('a sign-in that is refused saves nothing and says so', async () => {
    const before = await new OsKeychainBackend(service).get('mcp-server:docs');
    const login = await airlock(['mcp-servers', 'login', 'docs', '--no-browser'], async (url) => {
      const redirect = new URL(url).searchParams.get('redirect_uri') as string;
      const state = new URL(url).searchParams.get('state') as string;
      // A page answering for another sign-in is ignored; the user's own refusal ends it.
      expect((await fetch(`${redirect}?code=forged&state=not-${state}`)).status).toBe(400);
      expect((await fetch(`${redirect}?error=access_denied&state=${state}`)).status).toBe(400);
    });
    expect(login.code).not.toBe(0);
    expect(login.stderr).toMatch(/sign-in to MCP server "docs" was refused \(access_denied\); nothing was saved/);
    expect(await new OsKeychainBackend(service).get('mcp-server:docs')).toBe(before);
  });
});
