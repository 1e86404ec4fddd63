import { describe, expect, it } from 'vitest';
import { endToEndHeaders, rawHeaderValues } from './hop-headers';

describe('hop-by-hop headers', () => {
  const raw = ['Host', 'a.test', 'Connection', 'keep-alive, X-Secret-Hop', 'X-Secret-Hop', '1', 'Transfer-Encoding', 'chunked', 'Upgrade', 'websocket', 'Accept', '*/*', 'accept', 'text/plain'];

  it('drops hop-by-hop headers and those Connection names, keeping names, order and repeats', () => {
    expect(endToEndHeaders(raw)).toEqual(['Host', 'a.test', 'Accept', '*/*', 'accept', 'text/plain']);
  });

  it('keeps Upgrade and Connection for a relayed WebSocket handshake', () => {
    expect(endToEndHeaders(raw, true)).toEqual(['Host', 'a.test', 'Connection', 'keep-alive, X-Secret-Hop', 'Upgrade', 'websocket', 'Accept', '*/*', 'accept', 'text/plain']);
  });

  it('reads every value of a header in any case', () => {
    expect(rawHeaderValues(raw, 'accept')).toEqual(['*/*', 'text/plain']);
  });
});
