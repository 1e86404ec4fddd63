import type { AgentEvent } from '../../contracts/agent-events';
import { AirlockError } from '../../contracts/errors';
import type { McpAnswer, NetworkAnswer } from '../../contracts/runs';
import type { Sandbox } from '../sandbox/sandbox';
import type { RunRecorder } from './run-recorder';

/** A port of a live run's sandbox published on the host's loopback. */
export interface PublishedPort {
  sandboxPort: number;
  hostPort: number;
  url: string;
}

/**
 * What the user does to a live run while it works (docs/architecture.md §1): answers its questions
 * (command approvals, network and MCP questions), allows a denied host, publishes a preview port,
 * opens a shell on its sandbox. Everything here reaches only what the run's steps made so far.
 */
export class RunLiveControls {
  constructor(private readonly rec: RunRecorder) {}

  /** Runs still in progress in this process. */
  activeRunIds(): string[] {
    return [...this.rec.live.keys()];
  }

  /** A live run's sandbox (for an interactive shell, diffs while running). */
  sandboxOf(runId: string): Sandbox | undefined {
    return this.rec.live.get(runId)?.made.sandbox;
  }

  /** Answers an approval request of a run in `ask` mode. */
  async approve(runId: string, requestId: string, approved: boolean): Promise<boolean> {
    const live = this.rec.live.get(runId);
    if (live?.kind !== 'agent') return false;
    const command = live.agent.pendingApprovals.get(requestId);
    const proc = live.agent.process;
    if (command === undefined || !proc) return false;
    live.agent.pendingApprovals.delete(requestId);
    const response: AgentEvent = { type: 'approval_response', id: requestId, approved };
    proc.write(`${JSON.stringify(response)}\n`);
    await live.audit.append('approval', { id: requestId, command, approved, by: 'user' });
    this.rec.emitEvent(live, response);
    await this.rec.update(live, { pendingApproval: undefined });
    return true;
  }

  /**
   * Publishes a port of a live run's sandbox on a random 127.0.0.1 port of the host (never another
   * interface); it closes when the run ends.
   */
  async publishPort(runId: string, sandboxPort: number): Promise<PublishedPort> {
    const live = this.rec.live.get(runId);
    const previews = live?.made.previews;
    if (!live || !previews) throw new AirlockError('CONFLICT', 'The run has no live sandbox (not started yet, or already ended); ports are published while it runs.');
    const p = await previews.publish(sandboxPort);
    await this.rec.note(live, `published sandbox port ${sandboxPort} at ${p.url}`);
    return { sandboxPort, hostPort: p.hostPort, url: p.url };
  }

  /** The ports a live run has published (none once it has ended). */
  previewPorts(runId: string): PublishedPort[] {
    return this.rec.live.get(runId)?.made.previews?.list() ?? [];
  }

  /** Every port published by a live run (the desktop app opens only these loopback links). */
  allPreviewPorts(): PublishedPort[] {
    return [...this.rec.live.values()].flatMap((l) => l.made.previews?.list() ?? []);
  }

  /** Allows a host the run's egress proxy denied (allow-list policy), while the run goes on. */
  async allowNetwork(runId: string, host: string, port: number | undefined, scope: 'once' | 'run' | 'project'): Promise<void> {
    const live = this.rec.live.get(runId);
    const network = live?.made.network;
    if (!live || !network) throw new AirlockError('CONFLICT', 'The run is not live under the allow-list network policy; nothing to allow.');
    await network.allow(host, port, scope);
    await live.audit.append('network', { policy: live.input.network, host, ...(port ? { port } : {}), allowed: true });
    await this.rec.note(live, `network: ${host}${port ? `:${port}` : ''} allowed (${scope}) by the user`);
  }

  /** Answers a network question of a live run (a waiting request, or an agent-proposed rule). */
  async answerNetwork(runId: string, id: string, answer: NetworkAnswer): Promise<boolean> {
    const approvals = this.rec.live.get(runId)?.made.network?.approvals;
    if (!approvals) return false;
    // Recorded by the approvals' own resolve event (answer and who gave it).
    return approvals.answer(id, answer);
  }

  /** Answers an MCP question of a live run (a call through its gateway waits, docs/architecture.md §20). */
  answerMcp(runId: string, id: string, answer: McpAnswer): boolean {
    const live = this.rec.live.get(runId);
    // Recorded by the questions' own resolve event (answer and who gave it).
    return (live?.kind === 'agent' && live.agent.grant?.mcp?.gateway.questions?.answer(id, answer)) || false;
  }
}
