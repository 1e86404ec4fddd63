import { describe, expect, it } from 'vitest';
import { AirlockError } from '../../../contracts/errors';
import { describeError } from '../../../contracts/error-help';
import { assertGvisorRegistered } from './gvisor';

const identity = { kind: 'docker' as const, version: '20.10.24', apiVersion: '1.41', rootless: false, limits: { enforced: true, missing: [] } };

describe('gVisor availability', () => {
  it('passes when the engine lists runsc', () => {
    expect(() => assertGvisorRegistered({ ...identity, runtimes: ['io.containerd.runc.v2', 'runc', 'runsc'] })).not.toThrow();
  });

  it('refuses, never falls back, when runsc is missing: GVISOR_UNAVAILABLE with the daemon.json fix', () => {
    let err: unknown;
    try {
      assertGvisorRegistered({ ...identity, runtimes: ['runc'] });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(AirlockError);
    const e = err as AirlockError;
    expect(e.kind).toBe('GVISOR_UNAVAILABLE');
    expect(e.message).toContain('runtimes: runc');
    expect(e.message).toContain('"runtimeArgs": ["--network=none"]');
    expect(e.message).toMatch(/\/etc\/docker\/daemon\.json/);
    expect(e.message).toMatch(/HUP|restart docker/);
    const help = describeError({ kind: e.kind, message: e.message });
    expect(help.title).toBe('gVisor isolation is not available');
    expect(help.actions).toEqual(['open-setup-check']);
  });
});
