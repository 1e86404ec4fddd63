/**
 * URL-sourced content as a side door (docs/architecture.md §12, "URL-sourced content"): an image,
 * document or file whose source is a URL makes the *provider's* servers fetch that URL, so with the
 * network off data could still leave (in the URL itself, or by what the fetch answers), and a carried
 * conversation would resend it every turn. The proxy replaces each such item with a short text note
 * in the same place and records it; inline content (base64, `data:` URLs) and provider file ids (a
 * file already stored with the provider, nothing fetched) stay.
 *
 * What counts, in every format (a compatible gateway may translate one into another):
 * - Anthropic: any block with a `source` object of `type: "url"` (or any `source.url`): `image`,
 *   `document`, at any depth — user turns, `tool_result` content, `system` arrays, nested documents;
 * - OpenAI Chat / Responses and compatible APIs: any object with a `*_url` member whose value is a URL
 *   (or `{ url }`) other than `data:` — `image_url`, `input_image.image_url`, `input_file.file_url`,
 *   `document_url`, `audio_url`, `video_url` — or one level down (`file: { file_url }`), in `input`
 *   items at any depth, `function_call_output` content included.
 *
 * Cost: the walk runs only when the received text could hold such an item at all (`mayHoldUrlContent`);
 * a conversation of plain text is never walked.
 */

import { hasDuplicateKey, topLevelSpans } from '../upstream/json-body';

/** The side-door name (for `allowSideDoors` and the audit record). */
export const URL_CONTENT = 'url_content';

/** Top-level fields that carry conversation content. */
export const CONTENT_FIELDS = ['messages', 'input', 'system', 'instructions', 'prompt'] as const;

/** Deeper than this, the walk refuses the call rather than guess (real conversations nest ~10 levels). */
export const MAX_CONTENT_DEPTH = 100;

export const URL_CONTENT_NOTE =
  "[Airlock removed content the provider would have fetched from a URL outside the sandbox. Send it inline (base64 or a data: URL) instead.]";

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A URL the provider would fetch: any non-empty string that is not a `data:` URL. */
function isFetchedUrl(v: unknown): boolean {
  return typeof v === 'string' && v.trim() !== '' && !/^\s*data:/i.test(v);
}

function urlMemberOf(o: Record<string, unknown>): boolean {
  for (const k in o) {
    if (!k.endsWith('_url')) continue;
    const v = o[k];
    if (isFetchedUrl(v) || (isObj(v) && isFetchedUrl(v.url))) return true;
  }
  return false;
}

/** Whether this object is a content item the provider would fill by fetching a URL (one pass over its keys). */
export function isUrlSourced(o: Record<string, unknown>): boolean {
  for (const k in o) {
    const v = o[k];
    if (k === 'source') {
      if (isObj(v) && (v.type === 'url' || typeof v.url === 'string')) return true;
    } else if (k.endsWith('_url')) {
      if (isFetchedUrl(v) || (isObj(v) && isFetchedUrl(v.url))) return true;
    } else if (isObj(v) && urlMemberOf(v)) {
      return true;
    }
  }
  return false;
}

/**
 * Bytes without which no JSON parser can read a URL-sourced item in `raw`: every rule above needs
 * the token `"url"` (Anthropic's `source.type`/`source.url`) or a key ending `_url"`, unless a key or
 * value spells its letters as `\u` escapes. Absent all three, the text needs no walk — and whichever
 * way a parser reads duplicate keys, it finds none either. (~4 µs on 44 KB; `"source"` alone took
 * ~70, since memchr stops at every quote, and `url"` ~25: text is full of `u`.)
 */
export function mayHoldUrlContent(raw: Buffer, start = 0, end = raw.length): boolean {
  const text = start === 0 && end === raw.length ? raw : raw.subarray(start, end);
  return text.includes(URL_TOKEN) || text.includes(URL_KEY_END) || text.includes(ESCAPE);
}

const URL_TOKEN = Buffer.from('"url"');
const URL_KEY_END = Buffer.from('_url"');
const ESCAPE = Buffer.from('\\u');

class ContentTooDeep extends Error {}

function placeholder(o: Record<string, unknown>): Record<string, unknown> {
  return { type: typeof o.type === 'string' && o.type.startsWith('input_') ? 'input_text' : 'text', text: URL_CONTENT_NOTE };
}

/** Sets an own property even for `__proto__` (a JSON key like any other). */
function setOwn(o: Record<string, unknown> | unknown[], k: string | number, v: unknown): void {
  Object.defineProperty(o, k, { value: v, writable: true, enumerable: true, configurable: true });
}

/**
 * Walks one content field. Returns it unchanged (the same reference) when nothing was found or
 * `keep` is set, else a copy with each URL-sourced item replaced by a text note (copy-on-write: the
 * input is never mutated). `found` counts the items. Throws `ContentTooDeep` past `MAX_CONTENT_DEPTH`.
 */
export function stripUrlContent(value: unknown, keep: boolean, found: { count: number }): unknown {
  const walk = (node: unknown, depth: number): unknown => {
    if (typeof node !== 'object' || node === null) return node;
    if (depth > MAX_CONTENT_DEPTH) throw new ContentTooDeep();
    let out: Record<string, unknown> | unknown[] | undefined;
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) {
        const v = node[i];
        if (typeof v !== 'object' || v === null) continue;
        const w = walk(v, depth + 1);
        if (w !== v) setOwn((out ??= node.slice()), i, w);
      }
      return out ?? node;
    }
    const o = node as Record<string, unknown>;
    if (isUrlSourced(o)) {
      found.count++;
      return keep ? o : placeholder(o);
    }
    // A tool call's arguments are the model's own output, not content the provider fetches.
    const skipInput = o.type === 'tool_use' || o.type === 'server_tool_use';
    for (const k in o) {
      if (skipInput && k === 'input') continue;
      const v = o[k];
      if (typeof v !== 'object' || v === null) continue;
      const w = walk(v, depth + 1);
      if (w !== v) setOwn((out ??= { ...o }), k, w);
    }
    return out ?? o;
  };
  return walk(value, 0);
}

/** What the policy does to one body: the content fields to forward in place of the parsed ones. */
export interface UrlContentOutcome {
  /** URL-sourced items found (replaced, or kept when allowed). */
  found: number;
  /** Set when the body must go out re-serialised; `fields` then holds the content fields that changed. */
  reserialise: boolean;
  fields: Record<string, unknown>;
}

/**
 * Applies the rule to a parsed body (never mutated). With `raw`, walks only when the content fields'
 * text holds a needle (`spansAnyway`: the caller needs the body's top-level spans regardless, so the
 * whole-text pass is skipped), and keeps a field copyable as received only where no parser can read
 * it another way: a field naming a key twice inside is handed back as a copy (json-body.ts then
 * serialises it from the parse), and a repeated top-level key asks for re-serialisation (each key
 * once). Without `raw`, always walks. 'too-deep' past `MAX_CONTENT_DEPTH`.
 */
export function urlContentPolicy(parsed: Record<string, unknown>, raw: Buffer | undefined, keep: boolean, spansAnyway = false): UrlContentOutcome | 'too-deep' {
  const out: UrlContentOutcome = { found: 0, reserialise: false, fields: {} };
  const repeats = { found: false };
  if (raw) {
    // The whole text first (one memmem pass per needle), then the content fields' spans only: a tool
    // schema's, a server tool's or an MCP server's "url" starts no walk. A body that goes out
    // re-serialised (`spansAnyway`: it carries tools) has its spans scanned anyway, so it skips the
    // first pass. A repeated top-level key hides the copy JSON.parse skipped.
    if (!spansAnyway && !mayHoldUrlContent(raw)) return out;
    const spans = topLevelSpans(raw, repeats);
    const hit = !spans || repeats.found || CONTENT_FIELDS.some((key) => {
      const span = spans.get(key);
      return span !== undefined && mayHoldUrlContent(raw, span[0], span[1]);
    });
    if (!hit) return out;
  }
  const found = { count: 0 };
  try {
    for (const key of CONTENT_FIELDS) {
      const v = parsed[key];
      const w = stripUrlContent(v, keep, found);
      if (w !== v) out.fields[key] = w;
    }
  } catch (err) {
    if (err instanceof ContentTooDeep) return 'too-deep';
    throw err;
  }
  out.found = found.count;
  if (raw) {
    const spans = topLevelSpans(raw);
    for (const key of CONTENT_FIELDS) {
      const v = parsed[key];
      if (key in out.fields || typeof v !== 'object' || v === null) continue;
      const span = spans?.get(key);
      if (!span || hasDuplicateKey(raw, span[0], span[1])) out.fields[key] = Array.isArray(v) ? v.slice() : { ...v };
    }
  }
  out.reserialise = repeats.found || Object.keys(out.fields).length > 0;
  return out;
}
