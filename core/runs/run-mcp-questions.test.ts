import { readFile } from 'node:fs/promises';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { McpApprovalEvent, RunEvent, StartRunArgs } from '../../contracts/runs';
import { StartRunInput } from '../../contracts/runs';
import { MCP_CANARY, startLoopbackMcpServer, type LoopbackMcpServer } from '../../test/support/mcp-upstream';
import { createRunFakes, type RunFakes } from '../../test/support/run-fakes';
import { Secret } from '../keys/secret';
import type { McpServerEntry } from '../network/mcp-gateway/mcp-server-registry';
import { createMcpRunPolicy } from '../network/mcp-gateway/mcp-tool-policy';
import { GATEWAY_PATH, openRunMcpGateway, type RunMcpGateway } from '../network/mcp-gateway/run-mcp-gateway';
import { RunService } from './run-service';

/**
 * An MCP call that asks, through the run service (docs/architecture.md §20): the run's real gateway
 * and policy over a real SDK server on loopback (the sandbox and agent are the run fakes; an SDK
 * client stands in for the agent). The question is a run event, the service's `answerMcp` answers
 * it, and the audit log holds the question, the answer with who gave it, and each call's decision.
 */

let fakes: RunFakes;
let service: RunService;
let upstream: LoopbackMcpServer;
let gateway: RunMcpGateway | undefined;
beforeEach(async () => {
  fakes = await createRunFakes();
  upstream = await startLoopbackMcpServer();
  const entry: McpServerEntry = { name: 'demo', url: upstream.url, transport: 'http', auth: { type: 'bearer' }, addedAt: new Date().toISOString() };
  fakes.deps.mcpGateway = async (run) => {
    const { policy, hide, approvals } = createMcpRunPolicy({ entries: [entry], mode: run.approvals });
    gateway = await openRunMcpGateway({ runId: run.runId, servers: [{ entry, credential: new Secret(MCP_CANARY) }], policy, hide, questions: approvals });
    return gateway;
  };
  // The fake agent, marked as one that uses the gateway (only its start and exit are scripted).
  const agent = fakes.deps.agent('custom');
  fakes.deps.agent = () => ({ ...agent, supportsMcp: true });
  service = new RunService(fakes.deps);
});
afterEach(async () => {
  service.dispose();
  await fakes.dispose();
  await upstream.close();
});

const input = (): StartRunArgs => StartRunInput.parse({ projectDir: '/tmp/project', task: 'do it', agent: 'custom', customCommand: 'agent', provider: 'anthropic', model: 'm', mcpServers: ['demo'] });

describe('an MCP question through the run service', () => {
  it('waits as a run event; the user deny is a tool error, the allow passes; the audit records question, answer and decision', async () => {
    fakes.agentExit.code = 'hang';
    const events: RunEvent[] = [];
    service.onDidEvent((e) => events.push(e));
    const started = await service.start(input());
    await vi.waitFor(() => expect(fakes.log.some((l) => l.startsWith('spawn'))).toBe(true));
    const agent = new Client({ name: 'agent', version: '1' });
    await agent.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${gateway!.port}${GATEWAY_PATH}`), { requestInit: { headers: { Authorization: `Bearer ${gateway!.token}` } } }));
    const question = async (n: number): Promise<McpApprovalEvent> => {
      await vi.waitFor(() => expect(events.filter((e) => e.event.type === 'mcp_approval').length).toBe(n));
      return events.filter((e) => e.event.type === 'mcp_approval').at(-1)!.event as McpApprovalEvent;
    };

    const denied = agent.callTool({ name: 'demo__delete_item', arguments: { id: '7' } });
    const q1 = await question(1);
    expect(q1).toMatchObject({ server: 'demo', tool: 'delete_item', why: 'new', args: '{"id":"7"}' });
    expect(service.answerMcp(started.id, q1.id, 'deny')).toBe(true);
    expect((await denied).isError).toBe(true);
    expect(service.answerMcp(started.id, q1.id, 'once')).toBe(false); // no longer open

    const allowed = agent.callTool({ name: 'demo__delete_item', arguments: { id: '8' } });
    service.answerMcp(started.id, (await question(2)).id, 'once');
    expect((await allowed).content).toEqual([{ type: 'text', text: 'deleted 8' }]);
    expect(upstream.calls.map((c) => c.args)).toEqual([{ id: '8' }]);
    await agent.close();
    await service.cancel(started.id);
    await service.wait(started.id);

    expect(events.filter((e) => e.event.type === 'mcp_approval_resolved').map((e) => e.event)).toEqual([
      { type: 'mcp_approval_resolved', id: q1.id, answer: 'deny', by: 'user' },
      expect.objectContaining({ answer: 'once', by: 'user' }),
    ]);
    expect(events.filter((e) => e.event.type === 'mcp_call').map((e) => e.event)).toMatchObject([
      { type: 'mcp_call', tool: 'delete_item', decision: 'deny', by: 'user', reason: 'the user refused it', isError: true },
      { type: 'mcp_call', tool: 'delete_item', decision: 'allow', by: 'user', isError: false },
    ]);
    const audit = (await readFile(fakes.deps.store.paths(started.id).audit, 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as { type: string; data: Record<string, unknown> });
    const mcp = audit.filter((r) => r.type === 'mcp').map((r) => r.data);
    expect(mcp[0]).toMatchObject({ event: 'open', servers: [{ name: 'demo', tools: 5 }] });
    expect(mcp.slice(1).map((r) => [r.event, r.tool, r.why ?? r.answer ?? r.decision, r.by])).toEqual([
      ['ask', 'delete_item', 'new', undefined],
      ['answer', 'delete_item', 'deny', 'user'],
      ['call', 'delete_item', 'deny', 'user'],
      ['ask', 'delete_item', 'new', undefined],
      ['answer', 'delete_item', 'once', 'user'],
      ['call', 'delete_item', 'allow', 'user'],
    ]);
    expect(JSON.stringify(mcp)).not.toContain('"7"');
  });
});
