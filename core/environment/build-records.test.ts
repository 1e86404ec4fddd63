import { describe, expect, it } from 'vitest';
import { fromImages } from './build-records';

describe('fromImages: what a Dockerfile reads from the engine (docs/architecture.md §16, "The prepared path")', () => {
  it('names every FROM and --from= image, not earlier stages or scratch', () => {
    expect(fromImages('FROM debian:bookworm-slim\nRUN true\n')).toEqual(['debian:bookworm-slim']);
    expect(fromImages('from golang:1.22 as build\nRUN x\nFROM debian AS run\nCOPY --from=build /a /b\nCOPY --from=busybox:1 /c /d\nCOPY --from=0 /e /f\nRUN --mount=type=cache,from=alpine:3,target=/x true\n')).toEqual(['golang:1.22', 'debian', 'busybox:1', 'alpine:3']);
    expect(fromImages('FROM scratch AS empty\nFROM empty\n')).toBeUndefined();
  });

  it('gives no answer (the engine checks) where the host would have to interpret the build', () => {
    expect(fromImages('ARG V=12\nFROM debian:$V\n')).toBeUndefined();
    expect(fromImages('FROM --platform=linux/amd64 debian\n')).toBeUndefined();
    expect(fromImages('# syntax=docker/dockerfile:1\nFROM debian\n')).toBeUndefined();
    expect(fromImages('FROM debian\nADD https://example.invalid/x /x\n')).toBeUndefined();
    expect(fromImages('FROM debian\nCOPY --from=${IMG} /a /b\n')).toBeUndefined();
    expect(fromImages('FROM debian something else\n')).toBeUndefined();
  });
});
