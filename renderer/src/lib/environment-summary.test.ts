import { describe, expect, it } from 'vitest';
import { summarizeEnvironment } from './environment-summary';

describe('the environment a run record names', () => {
  it('says when the project\'s devcontainer was found and not used', () => {
    const s = summarizeEnvironment({ name: 'airlock', kind: 'airlock', notApplied: [{ field: '.devcontainer/devcontainer.json', reason: "not used, Airlock's own image ran instead: not accepted yet." }] });
    expect(s.title).toBe("Airlock's own image");
    expect(s.fallback).toEqual({ config: '.devcontainer/devcontainer.json', reason: 'not accepted yet.' });
  });
  it('names a devcontainer with its base image and a reused prepared environment; plain Airlock has no fallback', () => {
    const s = summarizeEnvironment({ name: 'devcontainer:.devcontainer/devcontainer.json', kind: 'devcontainer', baseImage: 'node:20', notApplied: [{ field: 'runArgs', reason: 'weakens the sandbox' }], prepared: { status: 'reused', key: 'k' } });
    expect(s).toEqual({ title: 'devcontainer .devcontainer/devcontainer.json (from node:20)', prepared: 'setup skipped: a prepared environment was reused' });
    expect(summarizeEnvironment({ name: 'airlock', kind: 'airlock', notApplied: [] }).fallback).toBeUndefined();
    expect(summarizeEnvironment(undefined).title).toBe("Airlock's own image");
  });
});
