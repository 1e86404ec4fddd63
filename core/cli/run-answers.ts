import { createInterface } from 'node:readline';
import type { McpAnswer, NetworkAnswer, RunSummary } from '../../contracts';
import { AirlockError } from '../../contracts/errors';
import type { servicesFor } from '../app-services';
import { debugLog } from '../common/debug-log';
import type { CliIo } from './command';

/**
 * Starts a run; when the project's devcontainer is not accepted yet (building it runs the project's
 * code, docs/architecture.md §16) and a person is at the terminal, shows why and asks once.
 */
export async function startTrusting(io: CliIo, json: boolean, start: (trust: boolean) => Promise<RunSummary>): Promise<RunSummary> {
  try {
    return await start(false);
  } catch (err) {
    if (!(err instanceof AirlockError && err.kind === 'FORBIDDEN' && err.field === 'environment') || json || !io.stdin.isTTY) throw err;
    io.stderr.write(`${err.message}\nBuild and run this environment? [y/N] `);
    const rl = createInterface({ input: io.stdin, terminal: false });
    const answer = await new Promise<string>((resolve) => {
      rl.once('line', resolve);
      rl.once('close', () => resolve(''));
    });
    rl.close();
    if (!/^y(es)?$/i.test(answer.trim())) throw err;
    return start(true);
  }
}

/**
 * A line answering a network or MCP question: a word (`once`) or its first letter, or `{"answer":"once"}`
 * with --json; anything not offered denies.
 */
export function parseChoice<A extends string>(line: string, offered: readonly A[], json: boolean): A | 'deny' {
  let word = line.trim().toLowerCase();
  if (json && word.startsWith('{')) {
    try {
      word = String((JSON.parse(line) as { answer?: unknown }).answer ?? '');
    } catch {
      word = '';
    }
  }
  return offered.find((a) => a === word || (word.length === 1 && a.startsWith(word))) ?? 'deny';
}

/**
 * Answers approval requests from stdin: each line (`y`/`n` on a TTY prompt, or
 * `{"approved":true}` with --json) answers the oldest open request. No answer means no run.
 */
export function answerApprovals(io: CliIo, runId: string, services: Pick<ReturnType<typeof servicesFor>, 'runs'>, json: boolean): { close(): void } {
  const rl = createInterface({ input: io.stdin, terminal: false });
  const waiting: Array<{ kind: 'command'; id: string } | { kind: 'network'; id: string; answers: NetworkAnswer[] } | { kind: 'mcp'; id: string; answers: McpAnswer[] }> = [];
  const answers: string[] = [];
  const settle = () => {
    while (waiting.length && answers.length) {
      const q = waiting.shift() as (typeof waiting)[number];
      const line = answers.shift() as string;
      if (q.kind === 'network') void services.runs.answerNetwork({ runId, id: q.id, answer: parseChoice(line, q.answers, json) }).catch(debugLog.swallow('cli.run.answerNetwork'));
      else if (q.kind === 'mcp') void services.runs.answerMcp({ runId, id: q.id, answer: parseChoice(line, q.answers, json) }).catch(debugLog.swallow('cli.run.answerMcp'));
      else void services.runs.approve({ runId, requestId: q.id, approved: parseAnswer(line, json) }).catch(debugLog.swallow('cli.run.approve'));
    }
  };
  const sub = services.runs.onDidEvent((e) => {
    if (e.runId !== runId) return;
    if (e.event.type === 'approval_request') waiting.push({ kind: 'command', id: e.event.id });
    else if (e.event.type === 'network_approval') waiting.push({ kind: 'network', id: e.event.id, answers: e.event.answers });
    else if (e.event.type === 'mcp_approval') waiting.push({ kind: 'mcp', id: e.event.id, answers: e.event.answers });
    else if (e.event.type === 'network_approval_resolved' || e.event.type === 'mcp_approval_resolved') {
      // Timed out or answered elsewhere: the next line answers the next question, not this one.
      const id = e.event.id;
      const at = waiting.findIndex((w) => w.id === id);
      if (at >= 0) waiting.splice(at, 1);
    } else return;
    settle();
  });
  rl.on('line', (line) => {
    answers.push(line);
    settle();
  });
  return {
    close() {
      sub.dispose();
      rl.close();
    },
  };
}

function parseAnswer(line: string, json: boolean): boolean {
  if (json && line.trim().startsWith('{')) {
    try {
      return (JSON.parse(line) as { approved?: unknown }).approved === true;
    } catch {
      return false;
    }
  }
  return /^\s*y(es)?\s*$/i.test(line);
}
