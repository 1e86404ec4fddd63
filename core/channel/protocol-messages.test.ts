/**
 * The channel's control messages, each defined once (protocol.ts, guards.ts): every message type a
 * side sends is accepted as it is written today, and a malformed one is refused with an error that
 * names the field, never the value.
 */
import { describe, expect, it } from 'vitest';
import { array, dict, GuardError, int, object, optional, str, tagged, literal } from './guards';
import {
  checkMessage,
  decodeControl,
  encodeControl,
  helperMessage,
  ProtocolError,
  request,
  requestEnvelope,
  resultGuard,
  WATCH_BATCH_PATHS,
  type ControlMessage,
  type RequestOp,
} from './protocol';

/** Through the wire and back: what the other side's guard sees. */
const roundTrip = (m: ControlMessage) => decodeControl(encodeControl(m).subarray(9));

const exitInfo = { exitCode: 0, signal: null, timedOut: false, truncated: false, durationMs: 12, outputBytes: 3 };

const fromHelper: ControlMessage[] = [
  { t: 'hello', version: '1', node: 'v18.20.4', uid: 0, agentUid: 1000, pid: 7, pty: true },
  { t: 'res', id: 1, ok: true, value: { pid: 42 } },
  { t: 'res', id: 2, ok: false, error: { kind: 'NOT_FOUND', message: 'command not found: x' } },
  { t: 'exit', stream: 3, info: exitInfo },
  { t: 'exit', stream: 5, info: { ...exitInfo, exitCode: null, signal: 'SIGKILL', timedOut: true } },
  { t: 'watch', watchId: 1, paths: ['/workspace/a.txt', '/workspace/b'] },
  { t: 'watchError', watchId: 1, message: 'inotify limit reached' },
  { t: 'accept', listenerId: 2, stream: 4 },
  { t: 'refused', listenerId: 2, count: 1 },
];

const fromHost: ControlMessage[] = [
  {
    t: 'req',
    id: 1,
    op: 'spawn',
    stream: 1,
    spawn: { argv: ['sh', '-c', 'true'], cwd: '/workspace', env: { A: 'b' }, pty: { cols: 80, rows: 24 }, timeoutMs: 500, maxOutputBytes: 4096, killGraceMs: 100, as: 'helper' },
  },
  { t: 'req', id: 2, op: 'spawn', stream: 3, spawn: { argv: ['true'] } },
  { t: 'req', id: 3, op: 'kill', stream: 1, signal: 'SIGTERM' },
  { t: 'req', id: 4, op: 'resize', stream: 1, cols: 100, rows: 30 },
  { t: 'req', id: 5, op: 'readFile', stream: 5, path: '/etc/hostname', maxBytes: 1024 },
  { t: 'req', id: 6, op: 'writeFile', stream: 7, path: '/workspace/x', mode: 0o644 },
  { t: 'req', id: 7, op: 'writeFile', stream: 9, path: '/workspace/y' },
  { t: 'req', id: 8, op: 'list', path: '/workspace' },
  { t: 'req', id: 9, op: 'watch', watchId: 1, path: '/workspace', debounceMs: 100, ignore: ['.git/'], backend: 'auto' },
  { t: 'req', id: 10, op: 'unwatch', watchId: 1 },
  { t: 'req', id: 11, op: 'listen', listenerId: 2, port: 0 },
  { t: 'req', id: 16, op: 'listen', listenerId: 3, port: 0, maxConnections: 256 },
  { t: 'req', id: 12, op: 'unlisten', listenerId: 2 },
  { t: 'req', id: 13, op: 'connect', stream: 11, port: 3000 },
  { t: 'req', id: 14, op: 'ping' },
  { t: 'req', id: 15, op: 'stats' },
];

const results: { [Op in RequestOp]: unknown } = {
  spawn: { pid: 42 },
  kill: {},
  resize: {},
  readFile: { size: 12 },
  writeFile: {},
  list: [{ name: 'a.txt', type: 'file', size: 3, mode: 0o644 }],
  watch: { backend: 'inotify' },
  unwatch: {},
  listen: { port: 4000 },
  unlisten: {},
  connect: {},
  ping: {},
  stats: { streams: 2, sinks: 3, mux: 1, closedIdle: 4 },
};

/** The error a guard throws for `value`, as the other side would report it. */
function refusal(check: () => unknown): string {
  try {
    check();
  } catch (err) {
    expect(err).toBeInstanceOf(GuardError);
    return (err as Error).message;
  }
  throw new Error('accepted');
}

describe('the helper’s messages, checked on the host', () => {
  it.each(fromHelper.map((m) => [m.t, m] as const))('accepts a %s as the helper writes it, unchanged', (_, m) => {
    expect(helperMessage.check(roundTrip(m))).toEqual(m);
  });

  it.each(Object.entries(results))('accepts the %s result', (op, value) => {
    expect(resultGuard(op as RequestOp).check(value)).toEqual(value);
  });

  const malformed: Array<[string, unknown, RegExp]> = [
    ['an unknown message type', { t: 'req', id: 1, op: 'ping' }, /^t: expected 'hello' or 'res' or 'exit' or 'watch' or 'watchError' or 'accept'/],
    ['a hello without pty', { t: 'hello', version: '1', node: 'v18', uid: 0, agentUid: 1000, pid: 1 }, /^pty: expected true or false, got undefined/],
    ['a hello with a long version', { t: 'hello', version: 'x'.repeat(65), node: 'v18', uid: 0, agentUid: 1000, pid: 1, pty: true }, /^version: expected a string of at most 64 characters, got a string of 65/],
    ['a hello with a fractional uid', { t: 'hello', version: '1', node: 'v18', uid: 0.5, agentUid: 1000, pid: 1, pty: true }, /^uid: expected an integer, got a fraction/],
    ['a response without an error', { t: 'res', id: 1, ok: false }, /a response with an error when ok is false/],
    ['a response with an id of 0', { t: 'res', id: 0, ok: true }, /^id: expected an integer >= 1/],
    ['an error of the wrong shape', { t: 'res', id: 1, ok: false, error: { kind: 3, message: 'x' } }, /^error\.kind: expected a string/],
    ['an exit with a string duration', { t: 'exit', stream: 1, info: { ...exitInfo, durationMs: '12' } }, /^info\.durationMs: expected a finite number, got a string of 2 characters/],
    ['an exit with a long signal name', { t: 'exit', stream: 1, info: { ...exitInfo, signal: 'S'.repeat(33) } }, /^info\.signal: expected a string of at most 32 characters, got a string of 33/],
    ['an exit on a helper stream', { t: 'exit', stream: 2, info: exitInfo }, /^stream: expected an odd stream id/],
    ['a watch batch that is not paths', { t: 'watch', watchId: 1, paths: 'x' }, /^paths: expected an array/],
    ['a watch batch with a number in it', { t: 'watch', watchId: 1, paths: ['a', 7] }, /^paths\[1\]: expected a string/],
    ['a watch batch above the batch size', { t: 'watch', watchId: 1, paths: Array(WATCH_BATCH_PATHS + 1).fill('a') }, /^paths: expected an array of at most 5000 items/],
    ['an accept on a host stream id', { t: 'accept', listenerId: 1, stream: 1 }, /^stream: expected an even stream id/],
    ['an accept on stream 0', { t: 'accept', listenerId: 1, stream: 0 }, /^stream: expected an even stream id/],
    ['a refusal of no connections', { t: 'refused', listenerId: 1, count: 0 }, /^count: expected an integer 1\.\.1024/],
  ];
  it.each(malformed)('refuses %s, naming the field', (_, m, message) => {
    expect(refusal(() => helperMessage.check(m))).toMatch(message);
  });

  it('refuses malformed results, naming the field', () => {
    expect(refusal(() => resultGuard('list').check([{ name: 1 }]))).toMatch(/^\[0\]\.name: expected a string/);
    expect(refusal(() => resultGuard('list').check([{ name: 'a', type: 'fifo', size: 1, mode: 0 }]))).toMatch(/^\[0\]\.type: expected 'file' or 'dir' or 'symlink' or 'other'/);
    expect(refusal(() => resultGuard('listen').check({ port: 70000 }))).toMatch(/^port: expected an integer 1\.\.65535/);
    expect(refusal(() => resultGuard('spawn').check(undefined))).toMatch(/^the message: expected an object, got undefined/);
  });

  it('derives what it returns: unknown keys dropped, long error text cut, no prototype taken over', () => {
    const m = helperMessage.check(JSON.parse('{"t":"res","id":1,"ok":false,"error":{"kind":"INTERNAL","message":"' + 'x'.repeat(5000) + '","extra":1},"__proto__":{"polluted":true}}'));
    expect(m).toEqual({ t: 'res', id: 1, ok: false, error: { kind: 'INTERNAL', message: 'x'.repeat(4000) } });
    expect((m as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('names the message on the host’s protocol error and never echoes the value', () => {
    const secret = 'sk-ant-should-never-be-echoed';
    let error: unknown;
    try {
      checkMessage(helperMessage, { t: 'exit', stream: 1, info: { ...exitInfo, signal: secret.repeat(3) } }, 'exit message from the sandbox helper');
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ProtocolError);
    expect((error as Error).message).toMatch(/^malformed exit message from the sandbox helper: info\.signal: expected/);
    expect((error as Error).message).not.toContain('sk-ant');
  });
});

describe('the host’s requests, checked in the helper', () => {
  it.each(fromHost.map((m) => [(m as { op: string }).op, m] as const))('accepts a %s request as the host writes it, unchanged', (_, m) => {
    const raw = roundTrip(m);
    expect({ ...requestEnvelope.check(raw), ...request.check(raw) }).toEqual(JSON.parse(JSON.stringify(m)));
  });

  const malformed: Array<[string, unknown, RegExp]> = [
    ['an unknown op', { op: 'format' }, /^op: expected 'spawn' or /],
    ['a spawn without argv', { op: 'spawn', stream: 1, spawn: {} }, /^spawn\.argv: expected a non-empty array/],
    ['a spawn with an empty argv', { op: 'spawn', stream: 1, spawn: { argv: [] } }, /^spawn\.argv: expected a non-empty array/],
    ['a spawn with an empty program', { op: 'spawn', stream: 1, spawn: { argv: [''] } }, /^spawn\.argv: expected a non-empty array of strings whose first \(the program\) is not empty/],
    ['a spawn with a number in argv', { op: 'spawn', stream: 1, spawn: { argv: ['echo', 1] } }, /^spawn\.argv\[1\]: expected a string/],
    ['a spawn as root', { op: 'spawn', stream: 1, spawn: { argv: ['id'], as: 'root' } }, /^spawn\.as: expected 'agent' or 'helper', got a string of 4 characters/],
    ['a spawn with a number in env', { op: 'spawn', stream: 1, spawn: { argv: ['env'], env: { A: 1 } } }, /^spawn\.env\.A: expected a string/],
    ['a spawn on an even stream', { op: 'spawn', stream: 2, spawn: { argv: ['true'] } }, /^stream: expected an odd stream id/],
    ['a readFile without a path', { op: 'readFile', stream: 1, maxBytes: 1 }, /^path: expected a string of 1\.\./],
    ['a watch with an unknown backend', { op: 'watch', watchId: 1, path: '/', debounceMs: 1, ignore: [], backend: 'kqueue' }, /^backend: expected 'auto' or 'inotify' or 'fs' or 'poll'/],
    ['a listen on a port out of range', { op: 'listen', listenerId: 1, port: 65536 }, /^port: expected an integer 0\.\.65535/],
    ['a listen with a cap past the most', { op: 'listen', listenerId: 1, port: 0, maxConnections: 1025 }, /^maxConnections: expected an integer 1\.\.1024/],
    ['a connect to port 0', { op: 'connect', stream: 1, port: 0 }, /^port: expected an integer 1\.\.65535/],
  ];
  it.each(malformed)('refuses %s, naming the field', (_, m, message) => {
    expect(refusal(() => request.check(m))).toMatch(message);
  });

  it('refuses a request envelope without a usable id', () => {
    expect(refusal(() => requestEnvelope.check({ t: 'req', id: '1', op: 'ping' }))).toMatch(/^id: expected an integer >= 1/);
  });

  it('never echoes a value: a run token in a malformed env stays out of the error', () => {
    const message = refusal(() => request.check({ op: 'spawn', stream: 1, spawn: { argv: ['x'], env: { ANTHROPIC_API_KEY: 'airlock-run-token-123', N: 5 } } }));
    expect(message).toMatch(/^spawn\.env\.N: expected a string/);
    expect(message).not.toContain('airlock-run-token');
  });
});

describe('the guard library', () => {
  it('infers types from one definition (checked by tsc) and keeps optional keys absent', () => {
    const g = object({ a: int({ min: 0 }), b: optional(str({ max: 3 })), c: optional(array(dict(str()))) });
    const v: { a: number; b?: string; c?: Array<Record<string, string>> } = g.check({ a: 1, z: 2 });
    expect(v).toEqual({ a: 1 });
    expect(Object.keys(v)).toEqual(['a']);
  });

  it('names nested fields in a tagged union', () => {
    const g = tagged('k', { x: object({ k: literal('x'), inner: object({ n: int({ max: 9 }) }) }) });
    expect(refusal(() => g.check({ k: 'x', inner: { n: 10 } }))).toBe('inner.n: expected an integer <= 9, got an integer out of range');
    expect(refusal(() => g.check({ k: 'y' }))).toBe("k: expected 'x', got a string of 1 characters");
    expect(refusal(() => g.check([]))).toBe('the message: expected an object, got an array of 0');
  });
});
