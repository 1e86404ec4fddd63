import { describe, expect, it, vi } from 'vitest';
import { channelNames, contracts, eventNames } from '../../contracts';
import { AirlockError } from '../../contracts/errors';
import { createApiRouter } from './router';
import { createFakeServices } from '../../test/support/fake-services';

describe('createApiRouter', () => {
  it('has a handler for every contract and a source for every event', () => {
    const services = createFakeServices();
    expect(() => createApiRouter(services)).not.toThrow();
    for (const channel of channelNames) {
      const [domain, verb] = channel.split(':') as [string, string];
      expect(typeof (services as unknown as Record<string, Record<string, unknown>>)[domain]?.[verb], channel).toBe('function');
    }
    expect(eventNames.length).toBeGreaterThan(0);
  });

  it('refuses to start when a contract has no handler', () => {
    const services = createFakeServices();
    const broken = { ...services, diffs: { ...services.diffs, apply: undefined } } as unknown as typeof services;
    expect(() => createApiRouter(broken)).toThrow(/diffs:apply/);
  });

  it.each(channelNames)('rejects invalid input to %s with INVALID_INPUT', async (channel) => {
    const router = createApiRouter(createFakeServices());
    for (const bad of [{ __unexpected: true }, 42, 'text', [1, 2]]) {
      const result = await router.invoke(channel, bad);
      expect(result.ok, `${channel} accepted ${JSON.stringify(bad)}`).toBe(false);
      if (!result.ok) expect(result.error.kind).toBe('INVALID_INPUT');
    }
  });

  it('rejects an unknown channel', async () => {
    const result = await createApiRouter(createFakeServices()).invoke('runs:explode', {});
    expect(result).toEqual({ ok: false, error: { kind: 'INVALID_INPUT', message: "unknown channel 'runs:explode'" } });
  });

  it('applies defaults and passes validated input to the service', async () => {
    const services = createFakeServices({ autoFinish: false });
    const router = createApiRouter(services);
    const result = await router.invoke('runs:start', { projectDir: '/p', task: 'do it', provider: 'anthropic', model: 'm' });
    expect(result.ok).toBe(true);
    expect(services.calls.find((c) => c.channel === 'runs:start')?.args).toMatchObject({
      agent: 'builtin', approval: 'auto', isolation: 'container', network: 'none', limits: { timeoutSec: 1800 },
    });
  });

  it('explains cross-field rules (custom agent without a command)', async () => {
    const result = await createApiRouter(createFakeServices()).invoke('runs:start', { projectDir: '/p', task: 't', provider: 'anthropic', model: 'm', agent: 'custom' });
    expect(result).toMatchObject({ ok: false, error: { kind: 'INVALID_INPUT', message: expect.stringContaining('customCommand') } });
  });

  it('turns a thrown AirlockError into an error envelope with its kind', async () => {
    const result = await createApiRouter(createFakeServices()).invoke('runs:get', { runId: 'r-abc-0000000a' });
    expect(result).toMatchObject({ ok: false, error: { kind: 'NOT_FOUND' } });
  });

  it('strips fields a service adds beyond the contract (a key never leaks)', async () => {
    const services = createFakeServices();
    services.keys.list = async () => [{ provider: 'openai', hasKey: true, last4: 'abcd', baseUrl: null, addedAt: null, key: 'sk-secret-abcd' } as never];
    const result = await createApiRouter(services).invoke('keys:list', undefined);
    expect(JSON.stringify(result)).not.toContain('sk-secret');
    expect(result).toEqual({ ok: true, value: [{ provider: 'openai', hasKey: true, last4: 'abcd', baseUrl: null, addedAt: null }] });
  });

  it('reports a service result that breaks its contract as INTERNAL without echoing it', async () => {
    const services = createFakeServices();
    services.keys.status = async () => ({ available: 'sk-secret' }) as never;
    const result = await createApiRouter(services).invoke('keys:status', {});
    expect(result).toMatchObject({ ok: false, error: { kind: 'INTERNAL' } });
    expect(JSON.stringify(result)).not.toContain('sk-secret');
  });

  it('delivers events validated and stops after dispose', async () => {
    const services = createFakeServices({ autoFinish: false });
    const router = createApiRouter(services);
    const seen: unknown[] = [];
    const sub = router.subscribe('runs:onDidChangeStatus', (p) => seen.push(p));
    const started = await router.invoke('runs:start', { projectDir: '/p', task: 't', provider: 'anthropic', model: 'm' });
    await vi.waitFor(() => expect(seen.length).toBeGreaterThan(0));
    sub.dispose();
    const before = seen.length;
    if (started.ok) services.finish((started.value as { id: string }).id);
    expect(seen.length).toBe(before);
  });

  it('drops payloads a subscriber skips before validating them', async () => {
    const services = createFakeServices({ autoFinish: false });
    const router = createApiRouter(services);
    const seen: Array<{ event: { type: string } }> = [];
    const validated: string[] = [];
    router.subscribe('runs:onDidEvent', (p) => seen.push(p as { event: { type: string } }), (p) => (p as { event: { type: string } }).event.type === 'assistant_text');
    const sub = router.subscribe('runs:onDidEvent', (p) => validated.push((p as { event: { type: string } }).event.type));
    await router.invoke('runs:start', { projectDir: '/p', task: 't', provider: 'anthropic', model: 'm' });
    await vi.waitFor(() => expect(validated).toContain('assistant_text'));
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.some((e) => e.event.type === 'assistant_text')).toBe(false);
    sub.dispose();
  });

  it('refuses an unknown event name', () => {
    expect(() => createApiRouter(createFakeServices()).subscribe('runs:onDidExplode', () => {})).toThrow(AirlockError);
  });

  it('every contract input and output is a zod schema', () => {
    for (const [name, c] of Object.entries(contracts)) {
      expect(typeof c.input.safeParse, name).toBe('function');
      expect(typeof c.output.safeParse, name).toBe('function');
    }
  });
});
