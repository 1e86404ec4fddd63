import { describe, expect, it } from 'vitest';
import { bodyLength, serializeBody, topLevelSpans } from './json-body';

/** What the proxy does with a body: parse it, change something, serialise it (json-body.ts). */
function roundTrip(text: string, change: (b: Record<string, unknown>) => Record<string, unknown>): { out: string; expected: Record<string, unknown> } {
  const raw = Buffer.from(text);
  const parsed = JSON.parse(raw.toString('utf8')) as Record<string, unknown>;
  const changed = change(parsed);
  const parts = serializeBody(changed, { raw, parsed });
  const out = Buffer.concat(parts);
  expect(bodyLength(parts)).toBe(out.length);
  return { out: out.toString('utf8'), expected: changed };
}

const stripTools = (b: Record<string, unknown>) => {
  const c = { ...b };
  delete c.mcp_servers;
  if (Array.isArray(c.tools)) c.tools = c.tools.filter((t: { type?: string }) => t.type !== 'web_search_20250305');
  return c;
};

describe('serializeBody', () => {
  it('copies an unchanged conversation byte for byte and serialises the rest from the parse', () => {
    // Odd spacing and escapes in the conversation survive as sent; the changed fields do not.
    const conversation = '[ {"role":"user",  "content":"a \\"quoted\\" \\\\ back\\\\\\"slash \\u00e9 ü 😀"} ]';
    const text = `{ "model" : "m", "messages" : ${conversation}, "tools":[{"type":"web_search_20250305","name":"web_search"},{"name":"t","input_schema":{}}], "mcp_servers":[{"url":"https://x.invalid"}] }`;
    const { out, expected } = roundTrip(text, stripTools);
    expect(out).toContain(`"messages":${conversation}`);
    expect(out).not.toContain('web_search');
    expect(out).not.toContain('mcp_servers');
    expect(JSON.parse(out)).toEqual(expected);
  });

  it('a duplicated key goes out once, with the value JSON.parse read (the last)', () => {
    const text = '{"messages":[{"role":"user","content":"first"}],"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"second"}],"tools":[{"name":"t","type":"web_search_20250305","type":"custom"}]}';
    const { out, expected } = roundTrip(text, stripTools);
    expect(out).not.toContain('first');
    expect(out).not.toContain('web_search');
    expect(out.match(/"messages"/g)).toHaveLength(1);
    expect(JSON.parse(out)).toEqual(expected);
  });

  it('tools the policy read go as received only where no parser can read them another way', () => {
    // Unchanged and unambiguous: byte for byte, odd spacing and all.
    const tools = '[ {"name":"a" , "input_schema":{"type":"object"}},{"name":"b","input_schema":{}} ]';
    expect(roundTrip(`{"model":"m","tools":${tools}}`, (b) => ({ ...b })).out).toBe(`{"model":"m","tools":${tools}}`);
    // Filtered: the kept elements as received (a run of them as one span), the stripped one gone.
    const three = '[{"type":"web_search_20250305","name":"web_search"} , {"name":"a" ,"x":1},  {"name":"b"}]';
    const filtered = roundTrip(`{"tools":${three},"mcp_servers":[]}`, stripTools);
    expect(filtered.out).toBe('{"tools":[{"name":"a" ,"x":1},  {"name":"b"}]}');
    expect(JSON.parse(filtered.out)).toEqual(filtered.expected);
    // A key named twice (or spelled with escapes) anywhere inside: serialised from the parse.
    for (const text of ['[{"name":"a", "type":"web_search_20250305","type":"custom"}]', '[{"name":"a", "typ\\u0065":"custom"}]']) {
      const { out, expected } = roundTrip(`{"tools":${text}}`, (b) => ({ ...b }));
      expect(out).toBe(JSON.stringify(expected));
    }
  });

  it('the shape remembered from the last call serves the same bytes only', () => {
    // Same length, one byte apart: the second names "name" twice and must be serialised from the parse.
    const once = '[ {"nome":"a","name":1} ]';
    const twice = '[ {"name":"a","name":1} ]';
    for (let i = 0; i < 2; i++) expect(roundTrip(`{"tools":${once}}`, (b) => ({ ...b })).out).toBe(`{"tools":${once}}`);
    const { out, expected } = roundTrip(`{"tools":${twice}}`, (b) => ({ ...b }));
    expect(out).toBe(JSON.stringify(expected));
    expect(roundTrip(`{"tools":${once}}`, (b) => ({ ...b })).out).toBe(`{"tools":${once}}`);
  });

  it('a partly replaced array keeps the untouched elements as received and serialises the new ones', () => {
    const text = '{"messages":[ {"role":"user","content":"a"} ,{"role":"user","content":[{"type":"image"}]}, {"role":"user", "content":"c"}]}';
    const { out, expected } = roundTrip(text, (b) => {
      const m = (b.messages as unknown[]).slice();
      m[1] = { role: 'user', content: [{ type: 'text', text: 'note' }] };
      return { ...b, messages: m };
    });
    expect(out).toBe('{"messages":[{"role":"user","content":"a"},{"role":"user","content":[{"type":"text","text":"note"}]},{"role":"user", "content":"c"}]}');
    expect(JSON.parse(out)).toEqual(expected);
  });

  it('a key spelled with escapes names the same field', () => {
    const text = '{"mess\\u0061ges":[1],"messages":[2],"tools":[]}';
    const spans = topLevelSpans(Buffer.from(text));
    expect(spans?.get('messages')).toEqual([text.indexOf('[2]'), text.indexOf('[2]') + 3]);
    const { out } = roundTrip('{"messages":[1],"mess\\u0061ges":[2],"tools":[]}', (b) => ({ ...b }));
    expect(JSON.parse(out)).toEqual({ messages: [2], tools: [] });
  });

  it('a changed or replaced conversation is serialised, not copied', () => {
    const { out } = roundTrip('{"messages":[ 1 ],"system":"s"}', (b) => ({ ...b, messages: [2] }));
    expect(out).toBe('{"messages":[2],"system":"s"}');
  });

  it('matches JSON.stringify on random bodies with random edits', () => {
    let seed = 7;
    const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    const pick = <T,>(xs: T[]): T => xs[Math.floor(rnd() * xs.length)] as T;
    const str = () => Array.from({ length: Math.floor(rnd() * 12) }, () => pick(['a', '"', '\\', '\\"', '\n', 'é', '😀', '}', ']', ',', ':', '{', '\u0000', ' '])).join('');
    const value = (depth: number): unknown => {
      const k = Math.floor(rnd() * (depth > 2 ? 4 : 6));
      if (k === 0) return str();
      if (k === 1) return Math.floor(rnd() * 1e6) / 100 - 5000;
      if (k === 2) return pick([true, false, null]);
      if (k === 3) return Math.floor(rnd() * 1e9);
      if (k === 4) return Array.from({ length: Math.floor(rnd() * 4) }, () => value(depth + 1));
      return Object.fromEntries(Array.from({ length: Math.floor(rnd() * 4) }, () => [str(), value(depth + 1)]));
    };
    const keys = ['messages', 'input', 'system', 'instructions', 'tools', 'model', 'stream', '__proto__', 'x"y', 'mcp_servers'];
    for (let n = 0; n < 500; n++) {
      // Hand-written text: random spacing and duplicated keys, which JSON.stringify never makes.
      const members = Array.from({ length: 1 + Math.floor(rnd() * 8) }, () => {
        const sp = () => pick(['', ' ', '\n\t ', '\r\n']);
        return `${sp()}${JSON.stringify(pick(keys))}${sp()}:${sp()}${JSON.stringify(value(0), null, pick([0, 1, 2]))}${sp()}`;
      });
      const text = `{${members.join(',')}}`;
      const { out, expected } = roundTrip(text, (b) => {
        const c = { ...b };
        if (rnd() < 0.5) delete c.mcp_servers;
        if (rnd() < 0.3) c.stream_options = { include_usage: true };
        if (rnd() < 0.2) c.system = 'replaced';
        // What the policy does to arrays: filter some elements out, replace one in place.
        for (const key of ['tools', 'messages', 'input']) {
          const v = c[key];
          if (!Array.isArray(v) || rnd() < 0.3) continue;
          const edited = v.filter(() => rnd() < 0.7);
          if (edited.length && rnd() < 0.5) edited[Math.floor(rnd() * edited.length)] = { type: 'text', text: str() };
          c[key] = edited;
        }
        return c;
      });
      // Same members, same order, same values as JSON.stringify would send (compared as re-serialised text).
      expect(JSON.stringify(JSON.parse(out))).toBe(JSON.stringify(expected));
    }
  });

  it('without the received text, or when nothing can be copied, it is JSON.stringify', () => {
    const body = { model: 'm', tools: [{ name: 't' }] };
    expect(Buffer.concat(serializeBody(body)).toString()).toBe(JSON.stringify(body));
    expect(Buffer.concat(serializeBody(body, { raw: Buffer.from('{"model":"m"}'), parsed: { model: 'm' } })).toString()).toBe(JSON.stringify(body));
  });

  it('a text the scanner cannot follow is not a span map', () => {
    expect(topLevelSpans(Buffer.from('[1]'))).toBeUndefined();
    expect(topLevelSpans(Buffer.from('{"a":"unterminated'))).toBeUndefined();
    expect(topLevelSpans(Buffer.from(' {} '))).toEqual(new Map());
  });
});
