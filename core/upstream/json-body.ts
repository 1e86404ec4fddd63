/**
 * Re-serialising a request body without re-serialising the conversation (docs/architecture.md §12,
 * "Side doors", cost). A body the proxy changed (a side door stripped, an output limit lowered,
 * `stream_options` added) or that carries tools goes out as the proxy parsed it, so no field the
 * proxy reads can be read another way upstream (a duplicate key). The bulk of such a body is the
 * conversation (`messages`, `input`, `system`, `instructions`), which the proxy never reads:
 * `JSON.stringify` of a 40 KB conversation cost ~80 µs per call, most of the side-door overhead.
 * Those fields, when unchanged, are copied as the byte span of their value in the received text
 * (the last one of a duplicated key, as `JSON.parse` reads it); every other field is serialised
 * from the parsed value, and each key appears once.
 */

/** Top-level fields the proxy never reads (no policy, budget or metering decision depends on them). */
const UNREAD_FIELDS: ReadonlySet<string> = new Set(['messages', 'input', 'system', 'instructions']);

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

function isSpace(c: number | undefined): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

function skipSpace(b: Uint8Array, i: number): number {
  while (isSpace(b[i])) i++;
  return i;
}

/** Index just past the string that opens at `i` (a `"`); -1 when it does not close. */
function stringEnd(b: Buffer, i: number): number {
  let from = i + 1;
  for (;;) {
    // memchr to the next quote: conversation text is long strings, so this is most of the scan.
    const q = b.indexOf(QUOTE, from);
    if (q < 0) return -1;
    let backslashes = 0;
    for (let k = q - 1; b[k] === BACKSLASH; k--) backslashes++;
    if (backslashes % 2 === 0) return q + 1;
    from = q + 1;
  }
}

/** Index just past the JSON value that starts at `i`; -1 when the text is not well formed there. */
function valueEnd(b: Buffer, i: number): number {
  const c = b[i];
  if (c === QUOTE) return stringEnd(b, i);
  if (c === 0x7b || c === 0x5b) {
    let depth = 0;
    let j = i;
    while (j < b.length) {
      const d = b[j] as number;
      if (d === QUOTE) {
        j = stringEnd(b, j);
        if (j < 0) return -1;
        continue;
      }
      if (d === 0x7b || d === 0x5b) depth++;
      else if (d === 0x7d || d === 0x5d) {
        depth--;
        if (depth === 0) return j + 1;
      }
      j++;
    }
    return -1;
  }
  // A number, true, false or null: up to the next separator.
  let j = i;
  while (j < b.length && b[j] !== 0x2c && b[j] !== 0x7d && b[j] !== 0x5d && !isSpace(b[j])) j++;
  return j > i ? j : -1;
}

/**
 * The byte span `[start, end)` of each top-level member's value in a JSON object text, by key; for a
 * duplicated key, the last (the one `JSON.parse` keeps). Undefined when the text is not a JSON object
 * this scanner can follow (the caller then serialises everything). Assumes `raw` already parsed.
 */
export function topLevelSpans(raw: Buffer): Map<string, [number, number]> | undefined {
  const spans = new Map<string, [number, number]>();
  let i = skipSpace(raw, 0);
  if (raw[i] !== 0x7b) return undefined;
  i = skipSpace(raw, i + 1);
  if (raw[i] === 0x7d) return spans;
  for (;;) {
    if (raw[i] !== QUOTE) return undefined;
    const keyEnd = stringEnd(raw, i);
    if (keyEnd < 0) return undefined;
    // A key with escapes is decoded by JSON.parse itself, so it names the same property.
    const keyText = raw.toString('utf8', i, keyEnd);
    const key = keyText.includes('\\') ? (JSON.parse(keyText) as string) : keyText.slice(1, -1);
    i = skipSpace(raw, keyEnd);
    if (raw[i] !== 0x3a) return undefined;
    const start = skipSpace(raw, i + 1);
    const end = valueEnd(raw, start);
    if (end < 0) return undefined;
    spans.set(key, [start, end]);
    i = skipSpace(raw, end);
    if (raw[i] === 0x7d) return spans;
    if (raw[i] !== 0x2c) return undefined;
    i = skipSpace(raw, i + 1);
  }
}

/** A JSON text as consecutive pieces, sent one after another (a conversation is not copied into a new buffer). */
export type BodyParts = readonly Buffer[];

/** Total bytes of a body given whole or in parts. */
export function bodyLength(body: Buffer | BodyParts): number {
  if (Buffer.isBuffer(body)) return body.length;
  let n = 0;
  for (const part of body) n += part.length;
  return n;
}

/**
 * `body` as JSON bytes, in parts, equal under `JSON.parse` to `JSON.stringify(body)`. `source` is
 * the text the body was parsed from and its parse: unchanged conversation fields (same value as in
 * `parsed`) are slices of `raw` instead of being serialised again.
 */
export function serializeBody(body: Record<string, unknown>, source?: { raw: Buffer; parsed: Record<string, unknown> }): BodyParts {
  const reusable = source ? Object.keys(body).some((k) => UNREAD_FIELDS.has(k) && isContainer(body[k]) && body[k] === source.parsed[k]) : false;
  const spans = reusable && source ? topLevelSpans(source.raw) : undefined;
  if (!spans || !source) return [Buffer.from(JSON.stringify(body))];
  const parts: Buffer[] = [];
  let text = '{';
  let first = true;
  for (const key of Object.keys(body)) {
    const value = body[key];
    // JSON.stringify leaves such members out; so does this.
    if (value === undefined || typeof value === 'function' || typeof value === 'symbol') continue;
    text += `${first ? '' : ','}${JSON.stringify(key)}:`;
    first = false;
    const span = UNREAD_FIELDS.has(key) && isContainer(value) && value === source.parsed[key] ? spans.get(key) : undefined;
    if (span) {
      parts.push(Buffer.from(text), source.raw.subarray(span[0], span[1]));
      text = '';
    } else {
      text += JSON.stringify(value);
    }
  }
  parts.push(Buffer.from(`${text}}`));
  return parts;
}

function isContainer(v: unknown): boolean {
  return typeof v === 'object' && v !== null;
}
