import { describe, expect, it } from 'vitest';
import { Emitter } from '../common/disposable';
import type { SandboxDriver, SandboxEvent, SandboxInfo, WipeProof } from './driver';
import { SandboxManager } from './sandbox';

/** A driver that only lists and records wipes: the reaper's decisions, without an engine. */
function listingDriver(infos: SandboxInfo[]): SandboxDriver & { destroyed: string[] } {
  const destroyed: string[] = [];
  return {
    kind: 'qemu',
    onDidEvent: new Emitter<SandboxEvent>().event,
    destroyed,
    create: () => Promise.reject(new Error('not used')),
    openChannel: () => Promise.reject(new Error('not used')),
    list: () => Promise.resolve(infos),
    destroy: (runId: string): Promise<WipeProof> => {
      destroyed.push(runId);
      return Promise.resolve({ runId, removed: [`dir:${runId}`], leftovers: [], durationMs: 0, verifiedAt: new Date().toISOString() });
    },
  };
}

describe('crash recovery and damaged sandbox records', () => {
  it('leaves a running sandbox whose record is damaged alone, and removes a stopped one', async () => {
    const base = { kind: 'qemu' as const, createdAt: '2026-01-01T00:00:00.000Z', recordProblem: 'vm.json is damaged: field owner' };
    const driver = listingDriver([
      { ...base, id: 'vm-r-live', runId: 'r-live', state: 'running' },
      { ...base, id: 'vm-r-stopped', runId: 'r-stopped', state: 'exited' },
      { kind: 'qemu', createdAt: base.createdAt, id: 'vm-r-orphan', runId: 'r-orphan', state: 'running' },
    ]);
    const manager = new SandboxManager(driver);
    const reaped = await manager.reapOrphans(() => false);
    expect(reaped.sort()).toEqual(['r-orphan', 'r-stopped']);
    expect(driver.destroyed).not.toContain('r-live');
    await manager.shutdown();
  });
});
