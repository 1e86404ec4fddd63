import { describe, expect, it } from 'vitest';
import { describeError } from './error-help';
import { ErrorKind } from './errors';

describe('describeError: the one mapping from error kinds to what a person reads', () => {
  it('gives every kind a plain title that is not the raw kind', () => {
    for (const kind of ErrorKind.options) {
      const help = describeError({ kind, message: 'm' });
      expect(help.title).not.toBe(kind);
      expect(help.title).not.toMatch(/^[A-Z_]+$/);
    }
  });

  it('offers the fix: a refused key is replaced, setup problems open the setup check, a missing folder is chosen again', () => {
    expect(describeError({ kind: 'UNAUTHORIZED', message: 'The provider refused your anthropic key (HTTP 401).' }).actions).toEqual(['replace-key']);
    expect(describeError({ kind: 'KEY_MISSING', message: 'x' }).actions).toEqual(['add-key']);
    expect(describeError({ kind: 'DOCKER_NOT_RUNNING', message: 'x' }).actions).toEqual(['open-setup-check']);
    expect(describeError({ kind: 'NOT_FOUND', message: 'x', field: 'projectDir' }).actions).toEqual(['choose-folder']);
    expect(describeError({ kind: 'NOT_FOUND', message: 'x' }).actions).toEqual([]);
    // A provider that failed a run: test it and see where it points.
    expect(describeError({ kind: 'UPSTREAM_ERROR', message: 'x', field: 'provider' }).actions).toEqual(['test-connection', 'open-keys']);
  });
});
