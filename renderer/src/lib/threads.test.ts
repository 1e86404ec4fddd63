// @vitest-environment jsdom
import { describe, expect, it } from 'vitest';
import type { RunSummary } from '../../../contracts';
import { threadRows } from './threads';

function run(id: string, createdAt: string, thread?: Partial<NonNullable<RunSummary['thread']>>): RunSummary {
  return {
    id, task: id, projectDir: '/p', agent: 'builtin', provider: 'anthropic', model: 'm', status: 'done', createdAt, startedAt: null, endedAt: null,
    usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, requests: 0 }, changedFiles: 0, isolation: 'container', network: 'none', approval: 'auto',
    ...(thread ? { thread: { rootRunId: 'r-root', parentRunId: 'r-root', turn: 2, conversation: 'carried', ...thread } } : {}),
  } as RunSummary;
}

describe('History threads', () => {
  it('marks a second follow-up to the same turn, and one from a checkpoint, as forks; the first follow-up is not one', () => {
    const rows = threadRows([
      run('r-fork2', '2026-12-03T10:03:00Z', {}),
      run('r-cp', '2026-12-03T10:04:00Z', { checkpoint: 3 }),
      run('r-first', '2026-12-03T10:01:00Z', {}),
      run('r-turn3', '2026-12-03T10:02:00Z', { parentRunId: 'r-first', turn: 3 }),
      run('r-root', '2026-12-03T10:00:00Z'),
    ]);
    const by = new Map(rows.map((r) => [r.run.id, r]));
    expect(by.get('r-root')).toMatchObject({ depth: 0, followUps: 4 });
    expect(by.get('r-first')?.fork).toBeUndefined();
    expect(by.get('r-turn3')?.fork).toBeUndefined();
    expect(by.get('r-fork2')?.fork).toEqual({ parentRunId: 'r-root' });
    expect(by.get('r-cp')?.fork).toEqual({ parentRunId: 'r-root', checkpoint: 3 });
  });
});

describe('History and MCP sessions', () => {
  it('offers no Run again for an MCP session (its task is the client session, not a task to repeat)', async () => {
    const { render, screen, cleanup } = await import('@testing-library/react');
    const { createElement } = await import('react');
    const { HistoryScreen } = await import('../components/history-screen');
    const { useRunsStore } = await import('../stores/runs-store');
    const session = { ...run('r-mcp', '2026-12-03T10:00:00Z'), agent: 'mcp', task: 'MCP session (claude-code)' } as RunSummary;
    const normal = run('r-normal', '2026-12-03T09:00:00Z');
    useRunsStore.setState({ runs: { [session.id]: session, [normal.id]: normal }, order: [session.id, normal.id], loaded: true, load: async () => undefined });
    render(createElement(HistoryScreen));
    const rows = [...document.querySelectorAll('tr[data-run]')] as HTMLElement[];
    expect(rows.map((r) => [r.dataset.run, r.textContent?.includes('Run again')])).toEqual([['r-mcp', false], ['r-normal', true]]);
    expect(screen.getAllByText('Run again')).toHaveLength(1);
    cleanup();
  });
});
