// @vitest-environment jsdom
import { act, cleanup, renderHook } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { ApplyResult, SelectionPatch } from '../../../contracts';
import { FAKE_PATCH_SHA256 } from '../../../test/support/fake-services';
import { connectFakeApp } from '../../../test/support/renderer-harness';
import { useAppStore } from '../stores/app-store';
import { useRunsStore } from '../stores/runs-store';
import { useAction } from './use-action';
import { useApplyFlow } from './use-apply-flow';

/*
 * The apply flow against fake services through the real router (the core's own apply is driven by
 * test/e2e/ui-apply.test.ts): the branch the host suggests, conflicts opening the merge view, and
 * "nothing to apply" for the same selection and mode only.
 */

const REVIEWED: SelectionPatch = { bytes: 10, sha256: FAKE_PATCH_SHA256, files: ['README.md'], text: 'diff --git' };
const REQUEST = { files: ['README.md'], selection: [] };

describe('useApplyFlow', () => {
  let disconnect: () => void;
  let runId: string;
  /** What `diffs:apply` answers instead of the fake's own apply (a conflict, say); undefined: the fake's. */
  let answer: ApplyResult | undefined;
  /** What each `diffs:apply` was sent. */
  let sent: unknown[];
  beforeEach(async () => {
    answer = undefined;
    sent = [];
    ({ disconnect } = connectFakeApp({ autoFinish: true }, (services) => {
      const fakeApply = services.diffs.apply.bind(services.diffs);
      services.diffs.apply = async (args) => {
        sent.push(args);
        return answer ?? fakeApply(args);
      };
    }));
    runId = (await useRunsStore.getState().start({ projectDir: '/p', task: 'greet', provider: 'anthropic', model: 'm' })).id;
    // The run's own "Run done" notice comes once it has finished (asynchronously): clear after it, so
    // the notices a test reads are the apply flow's alone, however loaded the machine.
    await vi.waitFor(() => expect(useAppStore.getState().notices.some((n) => n.text.startsWith('Run done'))).toBe(true));
    useAppStore.setState({ notices: [] });
  });
  afterEach(() => {
    cleanup();
    disconnect();
  });

  const setup = (opts: { checkpoint?: number; reviewed?: SelectionPatch } = {}) =>
    renderHook((p: { requestKey: string }) => {
      const action = useAction();
      const flow = useApplyFlow({ runId, scope: opts.checkpoint !== undefined ? `cp${opts.checkpoint}` : 'turn', checkpoint: opts.checkpoint, request: REQUEST, requestKey: p.requestKey, reviewed: 'reviewed' in opts ? opts.reviewed : REVIEWED, defaultMessage: 'greet', action });
      return { action, flow };
    }, { initialProps: { requestKey: 'k1' } });
  const answerWith = (r: Partial<ApplyResult>) => {
    answer = { applied: [], conflicts: [], held: [], unchanged: [], ...r };
  };

  it('offers the free branch the host names when the chosen one exists, from its typed error', async () => {
    const { result } = setup();
    act(() => result.current.flow.setMode('branch'));
    const branch = result.current.flow.branch;
    await act(() => result.current.flow.apply());
    expect(result.current.flow.result?.branch).toBe(branch);
    expect(result.current.flow.suggested).toBeUndefined();

    await act(() => result.current.flow.apply());
    expect(result.current.action.failure).toMatchObject({ kind: 'CONFLICT', field: 'branch' });
    expect(result.current.flow.suggested).toBe(`${branch}-2`);
    expect(result.current.flow.result).toBeUndefined();

    act(() => result.current.flow.takeSuggested());
    expect(result.current.flow.branch).toBe(`${branch}-2`);
    expect(result.current.flow.suggested).toBeUndefined();
    expect(result.current.action.error).toBeUndefined();
    await act(() => result.current.flow.apply());
    expect(result.current.flow.result?.branch).toBe(`${branch}-2`);
    expect(sent.at(-1)).toMatchObject({ mode: 'branch', branch: `${branch}-2`, message: 'greet', reviewedSha256: FAKE_PATCH_SHA256 });
  });

  it('opens the first conflict in the merge view, and only for the whole result in the working tree', async () => {
    answerWith({ conflicts: [{ path: 'README.md', reason: 'changed in your project too' }, { path: 'b.txt', reason: 'also' }], held: ['c.txt'] });
    const { result } = setup();
    await act(() => result.current.flow.apply());
    expect(result.current.flow.resolving).toBe('README.md');
    expect(useAppStore.getState().notices.at(-1)?.text).toMatch(/Nothing applied: 2 files conflict/);

    act(() => result.current.flow.markResolved('README.md'));
    expect(result.current.flow.resolving).toBeUndefined();
    expect([...result.current.flow.resolved]).toEqual(['README.md']);
    // Applying the others starts a new outcome: what was resolved belongs to the last one.
    answerWith({ applied: ['c.txt'], conflicts: [{ path: 'b.txt', reason: 'also' }] });
    await act(() => result.current.flow.apply(true));
    expect(sent.at(-1)).toMatchObject({ skipConflicts: true });
    expect(result.current.flow.resolved.size).toBe(0);

    const cp = setup({ checkpoint: 2 });
    await act(() => cp.result.current.flow.apply());
    expect(cp.result.current.flow.result?.conflicts).toHaveLength(1);
    expect(cp.result.current.flow.resolving).toBeUndefined();
  });

  it('says "nothing to apply" for the same selection and mode only', async () => {
    answerWith({ unchanged: ['README.md'] });
    const { result, rerender } = setup();
    await act(() => result.current.flow.apply());
    expect(result.current.flow.nothingToApply).toBe(true);
    act(() => result.current.flow.setMode('branch'));
    expect(result.current.flow.nothingToApply).toBe(false);
    act(() => result.current.flow.setMode('working-tree'));
    expect(result.current.flow.nothingToApply).toBe(true);
    rerender({ requestKey: 'k2' });
    expect(result.current.flow.nothingToApply).toBe(false);
  });

  it('sends nothing before the selection is reviewed, and says why', async () => {
    const { result } = setup({ reviewed: undefined });
    await act(() => result.current.flow.apply());
    expect(result.current.action.error).toMatch(/not collected yet/);
    expect(sent).toHaveLength(0);
  });
});
