import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { AirlockError } from '../../../contracts/errors';
import { ExitCode, type CliIo } from '../command';
import type { ReadinessCheck } from '../../doctor/doctor';
import { runDoctor } from './doctor';

function io(): CliIo & { text(): string } {
  const stdout = new PassThrough();
  const chunks: string[] = [];
  stdout.on('data', (c: Buffer) => chunks.push(c.toString()));
  return { stdout, stderr: new PassThrough(), stdin: new PassThrough(), env: {}, text: () => chunks.join('') };
}

const options = { json: false, build: true, agents: false };

describe('runDoctor', () => {
  it('exits 0 when every check passes and reports each', async () => {
    const out = io();
    const checks: ReadinessCheck[] = [
      { id: 'one', label: 'one', run: async () => ({ status: 'ok', detail: 'fine' }) },
      { id: 'two', label: 'two', run: async () => ({ status: 'warn', detail: 'meh', fix: 'do x' }) },
    ];
    expect(await runDoctor(checks, out, options)).toBe(ExitCode.ok);
    expect(out.text()).toMatch(/ok +one: fine/);
    expect(out.text()).toMatch(/warn +two: meh\n {6}fix: do x/);
  });

  it('exits 3 (unavailable) on a failure, with the fix, and later checks see the shared state', async () => {
    const out = io();
    const checks: ReadinessCheck[] = [
      {
        id: 'engine',
        label: 'engine',
        run: async () => {
          throw new AirlockError('DOCKER_NOT_RUNNING', 'engine down');
        },
      },
      { id: 'image', label: 'image', run: async (ctx) => (ctx.state.has('engine') ? { status: 'ok', detail: '' } : { status: 'skipped', detail: 'needs engine' }) },
    ];
    expect(await runDoctor(checks, out, options)).toBe(ExitCode.unavailable);
    expect(out.text()).toMatch(/FAIL +engine: engine down \[DOCKER_NOT_RUNNING\]\n {6}fix: Start the engine/);
    expect(out.text()).toMatch(/skip +image: needs engine/);
  });

  it('prints JSON with --json', async () => {
    const out = io();
    await runDoctor([{ id: 'a', label: 'A', run: async () => ({ status: 'ok', detail: 'd' }) }], out, { ...options, json: true });
    expect(JSON.parse(out.text())).toEqual({ ready: true, checks: [{ id: 'a', label: 'A', status: 'ok', detail: 'd' }], checkedAt: expect.any(String) });
  });
});
