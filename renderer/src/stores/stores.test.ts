import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { FakeServices } from '../../../test/support/fake-services';
import { connectFakeApp } from '../../../test/support/renderer-harness';
import { useDiffStore } from './diff-store';
import { useKeysStore } from './keys-store';
import { MAX_EVENTS_PER_RUN, useRunsStore } from './runs-store';


describe('stores over the contracts (fake services, real router)', () => {
  let services: FakeServices;
  let disconnect: () => void;
  beforeEach(() => {
    ({ services, disconnect } = connectFakeApp({ autoFinish: false }));
    useDiffStore.setState({ files: {}, patchSha256: {}, diffs: {} });
  });
  afterEach(() => disconnect());

  it('keys: saving a key keeps only its last 4 characters in the store', async () => {
    await useKeysStore.getState().load();
    await useKeysStore.getState().setKey({ provider: 'anthropic', key: 'sk-ant-secret-9876' });
    const state = useKeysStore.getState();
    expect(state.keys.find((k) => k.provider === 'anthropic')).toMatchObject({ hasKey: true, last4: '9876' });
    expect(JSON.stringify(state)).not.toContain('sk-ant-secret');
  });

  it('keys: a new base URL or key clears the last test verdict, which no longer describes it', async () => {
    await useKeysStore.getState().load();
    useKeysStore.setState({ tests: { anthropic: { provider: 'anthropic', status: 'bad-key', message: 'the key was refused (401)' } } });
    await useKeysStore.getState().setBaseUrl('anthropic', 'http://127.0.0.1:9/v1');
    expect(useKeysStore.getState().tests.anthropic).toBeUndefined();
    useKeysStore.setState({ tests: { anthropic: { provider: 'anthropic', status: 'bad-key', message: 'the key was refused (401)' } } });
    await useKeysStore.getState().setKey({ provider: 'anthropic', key: 'sk-ant-other-1234' });
    expect(useKeysStore.getState().tests.anthropic).toBeUndefined();
  });

  it('runs: a started run follows its pushed status and events; command output is not kept', async () => {
    const run = await useRunsStore.getState().start({ projectDir: '/p', task: 'task', provider: 'anthropic', model: 'm', approval: 'ask' });
    await vi.waitFor(() => expect(Boolean(useRunsStore.getState().runs[run.id]?.pendingApproval)).toBe(true));
    const live = useRunsStore.getState().live[run.id];
    expect(live?.events.some((e) => e.event.type === 'approval_request')).toBe(true);
    await useRunsStore.getState().approve(run.id, 'a1', true);
    expect(useRunsStore.getState().runs[run.id]?.pendingApproval).toBeUndefined();
    services.finish(run.id);
    await vi.waitFor(() => expect(useRunsStore.getState().runs[run.id]?.status === 'done').toBe(true));
    expect(useRunsStore.getState().live[run.id]?.events.some((e) => e.event.type === 'command_output')).toBe(false);
    expect(useRunsStore.getState().order[0]).toBe(run.id);
  });

  it('runs: a run opened while it ran gets its final record when it ends (the summary Review\'s commit message starts from)', async () => {
    const run = await useRunsStore.getState().start({ projectDir: '/p', task: 'a long task that the commit subject would cut', provider: 'anthropic', model: 'm', approval: 'ask' });
    await vi.waitFor(() => expect(Boolean(useRunsStore.getState().runs[run.id]?.pendingApproval)).toBe(true));
    await useRunsStore.getState().open(run.id);
    expect(useRunsStore.getState().live[run.id]?.record?.summary).toBeUndefined();
    services.finish(run.id);
    await vi.waitFor(() => expect(useRunsStore.getState().live[run.id]?.record?.summary).toBe('Added a greeting to README.md.'));
    expect(useRunsStore.getState().live[run.id]?.record?.status).toBe('done');
  });

  it('runs: a replay merges with live events by seq: nothing lost, nothing doubled', async () => {
    const run = await useRunsStore.getState().start({ projectDir: '/p', task: 'task', provider: 'anthropic', model: 'm' });
    services.finish(run.id);
    await vi.waitFor(() => expect(useRunsStore.getState().runs[run.id]?.status === 'done').toBe(true));
    // Events pushed before the view existed were missed live (seq 0 here); the replay fills them in.
    const live = useRunsStore.getState().live[run.id]?.events.map((e) => e.seq) ?? [];
    expect(live[0]).toBeGreaterThan(0);
    await useRunsStore.getState().open(run.id);
    const merged = useRunsStore.getState().live[run.id]?.events.map((e) => e.seq) ?? [];
    expect(merged).toEqual(merged.map((_, i) => i));
    expect(merged.length).toBe(live.length + live[0]!);
    // A fresh load (page reload) gives the same list.
    useRunsStore.setState({ runs: {}, order: [], live: {} });
    await useRunsStore.getState().open(run.id);
    expect(useRunsStore.getState().live[run.id]?.events.map((e) => e.seq)).toEqual(merged);
    expect(useRunsStore.getState().live[run.id]?.record?.excludedFiles).toEqual([{ path: '.env', reason: 'environment file (may hold secrets)' }]);
  });

  it('runs: memory per run is bounded', () => {
    useRunsStore.setState({ live: { 'r-1-00000000': { events: [], lastSeq: -1, replaying: false } } });
    for (let seq = 0; seq < MAX_EVENTS_PER_RUN + 50; seq++) {
      useRunsStore.getState().applyEvent({ runId: 'r-1-00000000', seq, at: '', event: { type: 'assistant_text', delta: 'x' } });
    }
    const live = useRunsStore.getState().live['r-1-00000000'];
    expect(live?.events).toHaveLength(MAX_EVENTS_PER_RUN);
    expect(live?.events[0]?.seq).toBe(50);
  });

  it('diffs: a change event invalidates and refetches the loaded list', async () => {
    const run = await useRunsStore.getState().start({ projectDir: '/p', task: 'task', provider: 'anthropic', model: 'm', approval: 'ask' });
    useDiffStore.setState({ files: { [run.id]: [] } });
    await vi.waitFor(() => expect((useDiffStore.getState().files[run.id]?.length ?? 0) === 2).toBe(true));
    expect(useDiffStore.getState().files[run.id]?.map((f) => f.path)).toContain('README.md');
  });
});
