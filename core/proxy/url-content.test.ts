import { describe, expect, it } from 'vitest';
import { applySideDoorPolicy } from './side-doors';
import { hasDuplicateKey } from '../upstream/json-body';
import { URL_CONTENT_NOTE, mayHoldUrlContent } from './url-content';

const NOTE = { type: 'text', text: URL_CONTENT_NOTE };
const INPUT_NOTE = { type: 'input_text', text: URL_CONTENT_NOTE };

function policy(format: 'anthropic' | 'openai', body: Record<string, unknown>, allow: string[] = []) {
  const raw = Buffer.from(JSON.stringify(body));
  return applySideDoorPolicy({ format, parsed: JSON.parse(raw.toString()) as Record<string, unknown>, raw, betaHeader: undefined, allow });
}

describe('URL-sourced content (issue 22 item 3)', () => {
  it('Anthropic: url images and documents in user turns, tool results, nested documents and system arrays become notes; base64 and file ids stay', () => {
    const b64 = { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } };
    const fileRef = { type: 'document', source: { type: 'file', file_id: 'file_1' } };
    const r = policy('anthropic', {
      model: 'm',
      system: [{ type: 'text', text: 'sys' }, { type: 'document', source: { type: 'url', url: 'https://attacker.invalid/s?d=1' } }],
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'hi' }, { type: 'image', source: { type: 'url', url: 'https://attacker.invalid/a.png' } }, b64, fileRef] },
        { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'x', input: { source: { type: 'url', url: 'kept: a tool argument' } } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: [{ type: 'text', text: 'out' }, { type: 'image', source: { type: 'url', url: 'https://attacker.invalid/b.png' } }] }] },
        { role: 'user', content: [{ type: 'document', source: { type: 'content', content: [{ type: 'image', source: { type: 'url', url: 'https://attacker.invalid/c' } }] } }] },
      ],
    });
    expect(r.stripped).toEqual(['url_content']);
    const body = r.body as { system: unknown[]; messages: Array<{ content: unknown[] }> };
    expect(JSON.stringify(body)).not.toContain('attacker.invalid');
    expect(body.system).toEqual([{ type: 'text', text: 'sys' }, NOTE]);
    expect(body.messages[0]?.content).toEqual([{ type: 'text', text: 'hi' }, NOTE, b64, fileRef]);
    expect(body.messages[1]?.content).toEqual([{ type: 'tool_use', id: 't1', name: 'x', input: { source: { type: 'url', url: 'kept: a tool argument' } } }]);
    expect(body.messages[2]?.content).toEqual([{ type: 'tool_result', tool_use_id: 't1', content: [{ type: 'text', text: 'out' }, NOTE] }]);
    expect(body.messages[3]?.content).toEqual([{ type: 'document', source: { type: 'content', content: [NOTE] } }]);
  });

  it('OpenAI Chat: http(s) image_url and file parts become text parts; data: URLs and input_audio stay', () => {
    const dataImage = { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } };
    const audio = { type: 'input_audio', input_audio: { data: 'UklGRg==', format: 'wav' } };
    const r = policy('openai', {
      model: 'm',
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'hi' }, { type: 'image_url', image_url: { url: 'https://attacker.invalid/x.png', detail: 'low' } }, dataImage, audio] },
        { role: 'tool', tool_call_id: 'c', content: [{ type: 'file', file: { file_url: 'http://attacker.invalid/f.pdf' } }, { type: 'image_url', image_url: 'ftp://attacker.invalid/y' }] },
      ],
    });
    expect(r.stripped).toEqual(['url_content']);
    const m = (r.body as { messages: Array<{ content: unknown[] }> }).messages;
    expect(m[0]?.content).toEqual([{ type: 'text', text: 'hi' }, NOTE, dataImage, audio]);
    expect(m[1]?.content).toEqual([NOTE, NOTE]);
  });

  it('OpenAI Responses: input_image and input_file URLs in input items and function_call_output become input_text; file ids stay', () => {
    const byId = { type: 'input_file', file_id: 'file_1' };
    const r = policy('openai', {
      model: 'm',
      input: [
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hi' }, { type: 'input_image', image_url: 'https://attacker.invalid/i.png' }, byId] },
        { type: 'function_call', call_id: 'c', name: 'shell', arguments: '{"image_url":"https://not-content.invalid"}' },
        { type: 'function_call_output', call_id: 'c', output: [{ type: 'input_file', file_url: 'https://attacker.invalid/f.pdf' }, { type: 'input_image', image_url: 'data:image/png;base64,AA==' }] },
      ],
    });
    expect(r.stripped).toEqual(['url_content']);
    const input = (r.body as { input: Array<Record<string, unknown>> }).input;
    expect(input[0]?.content).toEqual([{ type: 'input_text', text: 'hi' }, INPUT_NOTE, byId]);
    expect(input[1]).toMatchObject({ arguments: '{"image_url":"https://not-content.invalid"}' });
    expect(input[2]?.output).toEqual([INPUT_NOTE, { type: 'input_image', image_url: 'data:image/png;base64,AA==' }]);
  });

  it('the provider setting url_content lets them through, reported as allowed', () => {
    const body = { model: 'm', input: [{ type: 'input_image', image_url: 'https://example.invalid/i.png' }] };
    const r = policy('openai', body, ['url_content']);
    expect(r.stripped).toEqual([]);
    expect(r.allowed).toEqual(['url_content']);
    expect(r.body).toBeUndefined();
  });

  it('a key spelled with escapes is still found (the walk reads the parse, and \\u always walks)', () => {
    const raw = Buffer.from('{"model":"m","messages":[{"role":"user","content":[{"type":"image","sour\\u0063e":{"type":"url","url":"https://attacker.invalid"}}]}]}');
    expect(mayHoldUrlContent(raw)).toBe(true);
    const r = applySideDoorPolicy({ format: 'anthropic', parsed: JSON.parse(raw.toString()) as Record<string, unknown>, raw, betaHeader: undefined, allow: [] });
    expect(r.stripped).toEqual(['url_content']);
  });

  it('plain text conversations are not walked, and forwarded as received', () => {
    const raw = Buffer.from(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'look at https://example.invalid/x.png' }] }));
    expect(mayHoldUrlContent(raw)).toBe(false);
    const r = applySideDoorPolicy({ format: 'anthropic', parsed: JSON.parse(raw.toString()) as Record<string, unknown>, raw, betaHeader: undefined, allow: [] });
    expect(r).toEqual({ stripped: [], allowed: [] });
  });

  it('a duplicate key that hides a url source from JSON.parse makes the conversation go out as parsed', () => {
    // A first-wins parser would read the https URL; JSON.parse reads the data: URL.
    const raw = Buffer.from('{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://attacker.invalid/x.png"},"image_url":{"url":"data:image/png;base64,AA=="}}]}]}');
    expect(hasDuplicateKey(raw)).toBe(true);
    const parsed = JSON.parse(raw.toString()) as Record<string, unknown>;
    const r = applySideDoorPolicy({ format: 'openai', parsed, raw, betaHeader: undefined, allow: [] });
    expect(r.stripped).toEqual([]);
    expect(r.body).toBeDefined();
    expect(r.body?.messages).not.toBe(parsed.messages); // a copy: serialised from the parse, not copied as received
    expect(r.body?.messages).toEqual(parsed.messages);
  });

  it('a repeated top-level conversation field cannot hide a url source in the copy JSON.parse skips: the body goes out re-serialised, last copy only', () => {
    const raw = Buffer.from('{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://attacker.invalid"}}]}],"model":"m","messages":[{"role":"user","content":"hi"}]}');
    const parsed = JSON.parse(raw.toString()) as Record<string, unknown>;
    const r = applySideDoorPolicy({ format: 'anthropic', parsed, raw, betaHeader: undefined, allow: [] });
    expect(r.body).toEqual({ messages: [{ role: 'user', content: 'hi' }], model: 'm' });
  });

  it('hasDuplicateKey: per object, at any depth; strings and arrays do not count', () => {
    expect(hasDuplicateKey(Buffer.from('{"a":1,"b":{"a":1,"c":[{"a":1},{"a":2}]},"s":"\\"a\\":1,\\"a\\""}'))).toBe(false);
    expect(hasDuplicateKey(Buffer.from('{"a":1,"b":[{"x":1,"y":{"z":1,"z":2}}]}'))).toBe(true);
    expect(hasDuplicateKey(Buffer.from('{"a":1, "\\u0061" :2}'))).toBe(true);
    expect(hasDuplicateKey(Buffer.from('[{"a":1},{"a":1}]'))).toBe(false);
    // Past a few keys an object's keys are looked up in a Set: a duplicate is still found, distinct keys are not one.
    const many = Array.from({ length: 40 }, (_, i) => `"k${i}":${i}`);
    expect(hasDuplicateKey(Buffer.from(`{${many.join(',')}}`))).toBe(false);
    expect(hasDuplicateKey(Buffer.from(`{${many.join(',')},"k3":0}`))).toBe(true);
    expect(hasDuplicateKey(Buffer.from(`{${many.join(',')},"x":{"k3":0}}`))).toBe(false);
  });

  it('content nested past the walk depth is refused, not guessed', () => {
    let deep: unknown = { type: 'image', source: { type: 'url', url: 'https://attacker.invalid' } };
    for (let i = 0; i < 150; i++) deep = [deep];
    const r = policy('anthropic', { model: 'm', messages: [{ role: 'user', content: deep }] });
    expect(r.refusal).toMatchObject({ status: 400, name: 'url_content', message: expect.stringMatching(/deeper than 100 levels/) });
  });
});
