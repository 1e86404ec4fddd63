import { connect } from 'node:net';
import path from 'node:path';
import { AirlockError } from '../../contracts/errors';
import type { Sandbox } from '../sandbox/sandbox';
import type { AgentGrant, LiveAgentRun, LiveRun, RunNetwork, StepHost } from './run-context';

/*
 * The network steps of a run (docs/architecture.md §1, §4, §20): an agent run's grant (run token,
 * model proxy, policy, MCP gateway), and the policy alone, which an MCP session gets too.
 */

/**
 * Mints the run token and makes the model proxy appear inside the sandbox on loopback, through the
 * channel (docs/architecture.md §4); sets up the egress proxy for a wider policy than `none`.
 */
export async function networkStep(host: StepHost, run: LiveAgentRun, sandbox: Sandbox, turnEnded: () => Promise<void>): Promise<AgentGrant> {
  const { id, spec } = run;
  const input = spec.args;
  const grant = run.disposables.add(
    host.deps.proxy.issueToken({
      runId: id,
      providers: [input.provider],
      agent: input.agent,
      // The run's turn boundary as the host sees it: checkpoints (docs/architecture.md §19).
      beforeForward: turnEnded,
      budget: {
        ...(input.limits.budgetTokens ? { maxTokens: input.limits.budgetTokens } : {}),
        ...(input.limits.budgetUsd ? { maxCostUsd: input.limits.budgetUsd } : {}),
      },
    }),
  );
  const exposed = run.disposables.add(await sandbox.channel.exposeHostService(0, () => connect(host.deps.proxyPort, '127.0.0.1'), { name: 'model proxy' }));
  // A subscription credential: placeholders for the client's own credential slot (§6).
  const credential = await host.deps.proxy.sandboxCredential?.(id, grant.token);
  const made: AgentGrant = { token: grant.token, tokenBytes: Buffer.from(grant.token), sandboxPort: exposed.port, ...(credential ? { credential } : {}) };
  // Host-run commands redact the token from here on.
  run.agent.grant = made;
  if (credential) await run.audit.append('note', { message: `subscription credential '${input.provider}' (${credential.kind}) serves this ${input.agent} run; the sandbox holds only run-scoped placeholders in its place` });
  const network = await policyStep(host, run, sandbox);
  if (network) made.network = network;
  const mcp = await mcpStep(host, run, sandbox);
  if (mcp) made.mcp = mcp;
  return made;
}

/**
 * The run's MCP gateway (docs/architecture.md §20): the user's servers named for the run, connected
 * on the host with their credentials, appear inside the sandbox as one endpoint on loopback through
 * the channel, under a token of the run's own; the gateway and its token go with the run.
 */
async function mcpStep(host: StepHost, run: LiveAgentRun, sandbox: Sandbox): Promise<AgentGrant['mcp']> {
  const names = run.spec.args.mcpServers ?? [];
  if (names.length === 0) return undefined;
  if (!host.deps.mcpGateway) throw new AirlockError('INTERNAL', 'the MCP gateway is not wired in this build');
  await host.update(run, { phase: `connecting MCP servers: ${names.join(', ')}` });
  const gateway = run.disposables.add(await host.deps.mcpGateway({ runId: run.id, projectDir: path.resolve(run.input.projectDir), servers: names, ...(run.input.isolation ? { isolation: run.input.isolation } : {}), approvals: run.input.networkApprovals ?? 'ask' }));
  const exposed = run.disposables.add(await sandbox.channel.exposeHostService(0, () => gateway.connect(), { name: 'MCP gateway' }));
  const mcp = { gateway, sandboxPort: exposed.port };
  await run.audit.append('mcp', { event: 'open', servers: gateway.record.servers });
  run.disposables.add(
    gateway.onDidCall((c) => {
      host.auditLater(run, 'mcp', { event: 'call', server: c.server, tool: c.tool, argsSha256: c.argsSha256, argsBytes: c.argsBytes, decision: c.decision, ...(c.by ? { by: c.by } : {}), ...(c.reason ? { reason: c.reason } : {}), resultBytes: c.resultBytes, isError: c.isError, ...(c.capped ? { capped: true } : {}), durationMs: c.durationMs });
      host.emitEvent(run, { type: 'mcp_call', server: c.server, tool: c.tool.slice(0, 200), decision: c.decision, ...(c.by ? { by: c.by.slice(0, 40) } : {}), ...(c.reason ? { reason: c.reason.slice(0, 500) } : {}), isError: c.isError, durationMs: c.durationMs });
      if (c.decision === 'deny') run.terminal.write(`\r\n\x1b[33m[airlock] MCP: refused ${c.server}/${c.tool}: ${c.reason ?? 'denied'}\x1b[0m\r\n`);
    }),
  );
  const questions = gateway.questions;
  if (questions) {
    // A call waits for the user (its rule asks, or its description is not the one pinned): a typed
    // event (the run view's prompt, the CLI's), an audit record and a notification; the answer likewise.
    run.disposables.add(
      questions.onDidAsk((q) => {
        host.emitEvent(run, { type: 'mcp_approval', ...q });
        const now = q.why === 'policy' ? undefined : gateway.tools.find((t) => t.server === q.server && t.tool === q.tool)?.descriptionHash;
        host.auditLater(run, 'mcp', { event: 'ask', id: q.id, server: q.server, tool: q.tool, why: q.why, ...(now ? { descriptionSha256: now } : {}) });
        host.deps.notify?.({ runId: run.id, title: q.why === 'policy' ? 'An MCP tool call is waiting for you' : 'An MCP tool changed since you enabled it', body: `${q.server}/${q.tool}`.slice(0, 200) });
        run.terminal.write(`\r\n\x1b[33m[airlock] MCP: ${q.server}/${q.tool} waits for your answer${q.why === 'changed' ? ' (its description changed since you enabled the server)' : q.why === 'new' ? ' (not among the tools pinned when you enabled the server)' : ''}\x1b[0m\r\n`);
      }),
    );
    run.disposables.add(
      questions.onDidResolve((r) => {
        host.emitEvent(run, { type: 'mcp_approval_resolved', id: r.id, answer: r.answer, by: r.by });
        host.auditLater(run, 'mcp', { event: 'answer', id: r.id, server: r.question.server, tool: r.question.tool, answer: r.answer, by: r.by });
      }),
    );
  }
  const tools = gateway.record.servers.map((s) => `${s.name} (${s.tools} tools)`).join(', ');
  run.terminal.write(`\x1b[36m[airlock] MCP gateway: ${tools}; credentials stay on this machine\x1b[0m\r\n`);
  for (const s of gateway.record.servers) {
    if (s.changed?.length) run.terminal.write(`\x1b[33m[airlock] MCP: ${s.name}'s tool description(s) changed since you enabled it: ${s.changed.join(', ')} (their calls ask first)\x1b[0m\r\n`);
  }
  return mcp;
}

/**
 * Sets up the run's network policy: `none` is recorded; a wider one starts the egress proxy, and is
 * returned (its environment is what the sandbox's processes need to reach it).
 */
export async function policyStep(host: StepHost, run: LiveRun, sandbox: Sandbox): Promise<RunNetwork | undefined> {
  const { input, id } = run;
  if (input.network === 'none') {
    await run.audit.append('network', { policy: 'none' });
    return undefined;
  }
  if (!host.deps.network) throw new AirlockError('INTERNAL', 'network policies are not wired in this build');
  const net = run.disposables.add(await host.deps.network(sandbox, { runId: id, policy: input.network, allowlist: input.allowlist ?? [], egressRules: input.egressRules ?? [], secrets: input.secrets ?? [], internalHosts: input.internalHosts ?? [], networkApprovals: input.networkApprovals ?? 'ask', projectDir: path.resolve(input.projectDir) }));
  run.made.network = net;
  await run.audit.append('network', { policy: input.network, allow: net.record.allow, ...(net.record.internalHosts?.length ? { internalHosts: net.record.internalHosts } : {}), ...(net.record.gateway ? { gateway: net.record.gateway } : {}) });
  if (net.record.warning) run.terminal.write(`\x1b[33m[airlock] ${net.record.warning}\x1b[0m\r\n`);
  run.disposables.add(
    net.onDidConnect((e) => {
      // An intercepted request is audited in full: method, redacted path, status, bytes, rule, secret by name.
      host.auditLater(run, 'network', {
        policy: input.network,
        host: e.host,
        port: e.port,
        allowed: e.allowed,
        ...(e.intercepted ? { intercepted: true, method: e.method, path: e.path, status: e.status, bytesUp: e.bytesUp, bytesDown: e.bytesDown, ...(e.rule ? { rule: e.rule } : {}), ...(e.secret ? { secret: e.secret } : {}), ...(e.reason ? { reason: e.reason } : {}) } : {}),
      });
      if (e.allowed) return;
      // The typed event is what the UI and CLI act on; the terminal line is for people only.
      host.emitEvent(run, {
        type: 'network_blocked',
        host: e.host.slice(0, 300),
        port: e.port,
        method: e.method.slice(0, 20),
        ...(e.reason ? { reason: e.reason.slice(0, 500) } : {}),
        ...(e.path ? { path: e.path.slice(0, 500) } : {}),
        ...(e.rule ? { rule: e.rule.slice(0, 400) } : {}),
      });
      run.terminal.write(`\r\n\x1b[33m[airlock] blocked ${e.method} ${e.host}:${e.port}: ${e.reason ?? 'not on the allow-list'}\x1b[0m\r\n`);
    }),
  );
  // A command secret's command ran on the host: audited and said, never its value (docs/architecture.md §2.8).
  if (net.onDidFetchSecret) {
    run.disposables.add(
      net.onDidFetchSecret((f) => {
        host.auditLater(run, 'network', { policy: input.network, secretFetch: { secret: f.secret, trigger: f.trigger, ok: f.ok, ...(f.error ? { error: f.error.slice(0, 500) } : {}), durationMs: f.durationMs } });
        const what = f.trigger === '401' ? 'fetched again after a 401' : f.trigger === 'expired' ? 'fetched again (its life ran out)' : 'fetched on first use';
        run.terminal.write(f.ok ? `\r\n\x1b[36m[airlock] secret ${f.secret} ${what} by its host command\x1b[0m\r\n` : `\r\n\x1b[33m[airlock] secret ${f.secret} could not be fetched: ${f.error ?? 'the command failed'}\x1b[0m\r\n`);
      }),
    );
  }
  watchApprovals(host, run, net);
  return net;
}

/** Network questions put to the user (gateway runs): events, audit records and a notification. */
function watchApprovals(host: StepHost, run: LiveRun, net: RunNetwork): void {
  const { input, id } = run;
  const approvals = net.approvals;
  if (!approvals) return;
  // A request waits for the user, or the agent proposes a rule: a typed event (the UI's banner, the
  // CLI's prompt) and an audit record; the answer is recorded the same way (docs/architecture.md §2.8).
  run.disposables.add(
    approvals.onDidAsk((q) => {
      host.emitEvent(run, { type: 'network_approval', ...q });
      host.auditLater(run, 'network', { policy: input.network, host: q.host, port: q.port, approval: { id: q.id, kind: q.kind, method: q.method, path: q.path, ...(q.rule ? { rule: q.rule } : {}), ...(q.deniedBy ? { deniedBy: q.deniedBy } : {}), ...(q.reason ? { reason: q.reason } : {}), asked: true } });
      host.deps.notify?.({ runId: id, title: q.kind === 'proposal' ? 'The agent proposes a network rule' : 'A request is waiting for you', body: `${q.method} ${q.host}${q.path}`.slice(0, 200) });
      run.terminal.write(`\r\n\x1b[33m[airlock] ${q.kind === 'proposal' ? `the agent proposes the rule "${q.rule}"` : `${q.method} ${q.host}${q.path} waits for your answer (refused by ${q.deniedBy})`}\x1b[0m\r\n`);
    }),
  );
  run.disposables.add(
    approvals.onDidResolve((r) => {
      host.emitEvent(run, { type: 'network_approval_resolved', id: r.id, answer: r.answer, by: r.by });
      host.auditLater(run, 'network', { policy: input.network, host: r.request.host, port: r.request.port, allowed: r.answer !== 'deny', approval: { id: r.id, kind: r.request.kind, method: r.request.method, path: r.request.path, ...(r.request.rule ? { rule: r.request.rule } : {}), answer: r.answer, by: r.by } });
    }),
  );
}
