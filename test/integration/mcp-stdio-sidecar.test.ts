import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { McpServerRegistry } from '../../core/network/mcp-gateway/mcp-server-registry';
import { openRunMcpGateway, type RunMcpGateway } from '../../core/network/mcp-gateway/run-mcp-gateway';
import { parseStdioCommand } from '../../core/network/mcp-gateway/stdio-command';
import { LABEL_MCP_SERVER, mcpSidecarName, openStdioSidecar } from '../../core/network/mcp-gateway/stdio-sidecar';
import { LABEL_KIND, LABEL_RUN, runLabels } from '../../core/sandbox/labels';
import { requirePrerequisite } from '../support/prerequisites';
import { exec } from '../support/run-fixture';
import { sandboxImage, testEngine, testRunId } from './sandbox-support';

/**
 * A local (stdio) MCP server never runs on the host (docs/architecture.md §20): the npm package
 * `@modelcontextprotocol/server-everything` (pinned) is fetched on the host with scripts off and runs
 * in its own hardened sidecar with no network. The official SDK client, through the run's gateway,
 * lists and calls its `echo` and `get-sum` tools; from inside the sidecar neither a port the test opened
 * on the host's loopback nor a stand-in for the agent's sandbox (a container on its own network) can be
 * reached or even resolved; after the gateway closes, nothing labelled with the run is left.
 */

const SERVER_EVERYTHING = '@modelcontextprotocol/server-everything@2026.8.31';
const docker = await requirePrerequisite('docker');
const keychain = await requirePrerequisite('keychain');

describe.skipIf(!docker.ok || !keychain.ok)('MCP stdio server in its own sidecar', () => {
  const runId = testRunId();
  const sandboxName = `airlock-${runId}-agent-standin`;
  const sandboxNet = `airlock-${runId}-standin-net`;
  let home: string;
  let gateway: RunMcpGateway;
  let client: Client;
  let loopback: Server;
  let loopbackPort = 0;
  let loopbackHits = 0;

  beforeAll(async () => {
    home = await mkdtemp(path.join(os.tmpdir(), 'airlock-mcp-stdio-'));
    const engine = await testEngine();
    const image = await sandboxImage(engine);
    // A port on the host's loopback that answers anyone who reaches it (the sidecar must not).
    loopback = createServer((s) => {
      loopbackHits++;
      s.end('host-loopback\n');
    });
    await new Promise<void>((r) => loopback.listen(0, '127.0.0.1', () => r()));
    loopbackPort = (loopback.address() as { port: number }).port;
    // The agent's sandbox stand-in: a container on a network of its own, named as a sandbox is.
    await exec('docker', ['network', 'create', '--internal', '--label', `${LABEL_RUN}=${runId}`, sandboxNet]);
    await exec('docker', ['run', '-d', '--name', sandboxName, '--network', sandboxNet, '--network-alias', 'sandbox', '--label', `${LABEL_RUN}=${runId}`, '--label', `${LABEL_KIND}=sandbox`, '--entrypoint', 'sleep', image, 'infinity']);

    const registry = new McpServerRegistry({ home, service: `airlock-test-mcp-stdio-${randomBytes(4).toString('hex')}` });
    await registry.addStdio({ name: 'everything', stdio: parseStdioCommand(['npx', '-y', SERVER_EVERYTHING, 'stdio']) });
    const servers = await registry.resolve(['everything']);
    const { engineIdentity } = await import('../../core/sandbox/docker/engine');
    const host = { docker: engine.docker, engine: (await engineIdentity(engine)).kind, airlockImage: () => Promise.resolve(image), packageCache: path.join(home, 'mcp-packages') };
    gateway = await openRunMcpGateway({ runId, servers, stdio: (s) => openStdioSidecar(host, runId, s) });
    client = new Client({ name: 'stdio-sidecar-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${gateway.port}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${gateway.token}` } } }));
  }, 600_000);

  afterAll(async () => {
    await client?.close().catch(() => undefined);
    gateway?.dispose();
    await exec('docker', ['rm', '-f', sandboxName, mcpSidecarName(runId, 'everything')]).catch(() => undefined);
    await exec('docker', ['network', 'rm', sandboxNet]).catch(() => undefined);
    loopback?.close();
    await rm(home, { recursive: true, force: true });
  });

  it('stores the server as a package spec and a command, with no host path or network', async () => {
    const entry = await new McpServerRegistry({ home, service: 'unused' }).get('everything');
    expect(entry).toMatchObject({ transport: 'stdio', stdio: { package: SERVER_EVERYTHING, command: ['stdio'] } });
    expect(entry?.url).toBeUndefined();
  });

  it('keeps a secret environment value in the keychain only, never in the registry file', async () => {
    const registry = new McpServerRegistry({ home, service: `airlock-test-mcp-stdio-${randomBytes(4).toString('hex')}` });
    const canary = `stdio-secret-${randomBytes(8).toString('hex')}`;
    await registry.addStdio({ name: 'withsecret', stdio: parseStdioCommand(['node', '/srv/x.js'], { env: ['MODE=ro'] }) }, { API_TOKEN: canary });
    expect(await readFile(registry.file, 'utf8')).not.toContain(canary);
    const [resolved] = await registry.resolve(['withsecret']);
    expect(resolved?.entry.stdio).toMatchObject({ env: { MODE: 'ro' }, secretEnv: ['API_TOKEN'] });
    expect(resolved?.secretEnv?.API_TOKEN?.reveal()).toBe(canary);
    await registry.remove('withsecret');
    await registry.addStdio({ name: 'withsecret', stdio: parseStdioCommand(['node', '/srv/x.js']) });
    // The replaced entry's secret went with it.
    expect((await registry.resolve(['withsecret']))[0]?.secretEnv).toBeUndefined();
    await registry.remove('withsecret');
  });

  it('serves the sidecar server’s tools through the gateway: the SDK client lists and calls echo and get-sum', async () => {
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    expect(names).toContain('everything__echo');
    expect(names).toContain('everything__get-sum');
    expect(gateway.record.servers[0]).toMatchObject({ name: 'everything', origin: 'stdio:airlock', transport: 'stdio' });
    const echoed = await client.callTool({ name: 'everything__echo', arguments: { message: 'hello from the agent' } });
    expect(JSON.stringify(echoed.content)).toContain('hello from the agent');
    const sum = await client.callTool({ name: 'everything__get-sum', arguments: { a: 2, b: 40 } });
    expect(JSON.stringify(sum.content)).toContain('42');
  });

  it('runs hardened, with no network: no capabilities, read-only root, nobody, labelled with the run', async () => {
    const { stdout } = await exec('docker', ['inspect', mcpSidecarName(runId, 'everything')]);
    const [info] = JSON.parse(stdout) as Array<{ Config: { User: string; Labels: Record<string, string> }; HostConfig: { NetworkMode: string; CapDrop: string[]; CapAdd: string[] | null; ReadonlyRootfs: boolean; SecurityOpt: string[]; Binds: string[] | null; PidsLimit: number; Memory: number }; NetworkSettings: { Networks: Record<string, unknown> } }>;
    expect(info!.HostConfig.NetworkMode).toBe('none');
    expect(Object.keys(info!.NetworkSettings.Networks)).toEqual(['none']);
    expect(info!.HostConfig.CapDrop).toEqual(['ALL']);
    expect(info!.HostConfig.CapAdd ?? []).toEqual([]);
    expect(info!.HostConfig.ReadonlyRootfs).toBe(true);
    expect(info!.HostConfig.SecurityOpt).toContain('no-new-privileges');
    expect(info!.HostConfig.SecurityOpt.some((o) => o.startsWith('seccomp='))).toBe(true);
    expect(info!.HostConfig.Binds ?? []).toEqual([]);
    expect(info!.HostConfig.PidsLimit).toBeGreaterThan(0);
    expect(info!.HostConfig.Memory).toBeGreaterThan(0);
    expect(info!.Config.User).toBe('65534:65534');
    expect(info!.Config.Labels).toMatchObject({ ...runLabels(runId, 'sidecar'), [LABEL_MCP_SERVER]: 'everything' });
  });

  it('cannot reach the host’s loopback nor the agent’s sandbox from inside the sidecar', async () => {
    const name = mcpSidecarName(runId, 'everything');
    const sh = async (script: string) => (await exec('docker', ['exec', '-u', '65534:65534', name, 'sh', '-c', script])).stdout;
    // Interfaces and routes: loopback only, no route anywhere.
    const ifaces = (await sh('cat /proc/net/dev')).split('\n').slice(2).map((l) => l.split(':')[0]!.trim()).filter(Boolean);
    expect(ifaces).toEqual(['lo']);
    expect((await sh('cat /proc/net/route')).trim().split('\n').slice(1)).toEqual([]);
    expect((await sh('cat /proc/net/ipv6_route 2>/dev/null || true')).split('\n').filter((l) => l.trim() && !l.trim().endsWith('lo'))).toEqual([]);
    // The host's loopback port: 127.0.0.1 in the sidecar is its own; the host's listener is never reached.
    const probe = `const s=require('net').connect(${loopbackPort},'127.0.0.1');s.on('connect',()=>{console.log('connected');process.exit(0)});s.on('error',e=>{console.log(e.code);process.exit(0)});s.setTimeout(5000,()=>{console.log('timeout');process.exit(0)})`;
    expect((await sh(`node -e "${probe}"`)).trim()).toBe('ECONNREFUSED');
    // The agent's sandbox: its name and alias resolve nowhere, and the host's names for itself neither.
    for (const host of [sandboxName, 'sandbox', 'host.docker.internal']) {
      const lookup = `require('dns').lookup('${host}',(e,a)=>{console.log(e?e.code:'resolved '+a)})`;
      expect((await sh(`node -e "${lookup}"`)).trim()).toMatch(/^(ENOTFOUND|EAI_AGAIN)$/);
    }
    expect(loopbackHits).toBe(0);
  });

  it('is removed when the gateway closes; nothing of the sidecar is left by label', async () => {
    const engine = await testEngine();
    const removed = engine.docker.getContainer(mcpSidecarName(runId, 'everything')).wait({ condition: 'removed' });
    await client.close();
    gateway.dispose();
    await removed;
    const left = await engine.docker.listContainers({ all: true, filters: { label: [`${LABEL_RUN}=${runId}`, `${LABEL_KIND}=sidecar`] } });
    expect(left).toEqual([]);
  });
});
