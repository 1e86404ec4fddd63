import { describe, expect, it } from 'vitest';
import { architectureMismatch } from './derived-image';

describe('derived image architecture (docs/architecture.md §4 "Image architecture")', () => {
  it('accepts a user image of the sandbox’s own architecture, however the engine spells it', () => {
    expect(architectureMismatch('image golang:1.22', 'arm64', 'arm64')).toBeUndefined();
    expect(architectureMismatch('image golang:1.22', 'aarch64', 'arm64')).toBeUndefined();
    expect(architectureMismatch('image golang:1.22', 'x86_64', 'amd64')).toBeUndefined();
    // An engine that reports none (old or foreign API): nothing to compare, the recipe's own check decides.
    expect(architectureMismatch('image golang:1.22', undefined, 'arm64')).toBeUndefined();
  });

  it('refuses an amd64 devcontainer under an arm64 sandbox, naming both and what to do', () => {
    const err = architectureMismatch('the devcontainer of .devcontainer/devcontainer.json', 'amd64', 'arm64');
    expect(err?.kind).toBe('IMAGE_INCOMPATIBLE');
    expect(err?.field).toBe('environment');
    expect(err?.message).toMatch(/devcontainer\.json is built for amd64, but the sandbox here runs arm64.*--platform.*--environment airlock/);
  });
});
