import { describe, expect, it } from 'vitest';
import { AirlockError } from '../../contracts/errors';
import { assertVmCanRun } from './run-environment';

describe('assertVmCanRun', () => {
  it('lets a project environment into a VM on Linux (QEMU boots its derived image) and in containers anywhere', () => {
    expect(() => assertVmCanRun('vm', 'linux')).not.toThrow();
    expect(() => assertVmCanRun('container', 'darwin')).not.toThrow();
    expect(() => assertVmCanRun('gvisor', 'win32')).not.toThrow();
  });

  it('refuses it where the VM runs only Airlock\'s own image (Lima, WSL), saying what to choose instead', () => {
    for (const [platform, words] of [['darwin', /macOS \(Lima\)/], ['win32', /Windows \(WSL\)/]] as const) {
      let err: unknown;
      try {
        assertVmCanRun('vm', platform);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(AirlockError);
      expect((err as AirlockError).kind).toBe('INVALID_INPUT');
      expect((err as AirlockError).field).toBe('isolation');
      expect((err as AirlockError).message).toMatch(words);
      expect((err as AirlockError).message).toMatch(/--isolation container or gvisor/);
    }
  });
});
