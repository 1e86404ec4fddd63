/**
 * Re-serialising a request body without re-serialising what need not be (docs/architecture.md §12,
 * "The model proxy closes side doors", cost). A body the proxy changed (a side door stripped, an output limit lowered,
 * `stream_options` added) or that carries tools goes out as the proxy parsed it, so no field the
 * proxy reads can be read another way upstream (a duplicate key). Serialising it all again is the
 * cost: `JSON.stringify` of a 40 KB conversation took ~80 µs a call, of a Claude Code tool list
 * about as much. So a member whose value is still the parsed one is copied as the byte span of its
 * value in the received text (the last one of a duplicated key, as `JSON.parse` reads it):
 * - the conversation (`messages`, `input`, `system`, `instructions`), which no budget or meter
 *   reads, always; the one policy that reads it (URL-sourced content, url-content.ts) hands back
 *   copies of those fields when their text names a key twice (`hasDuplicateKey`), so those are not;
 * - any other member (tools, tool choice, …) only when its text names no key twice and spells none
 *   with escapes: then every JSON parser reads it as the proxy did.
 * An array the policy filtered or partly replaced (a server tool stripped, a URL item replaced) keeps
 * the received text of each element it kept, under the same rule; new elements are serialised.
 * Every other member is serialised from the parse, and each key appears once.
 */

/** Top-level fields no budget or meter reads; copied as received unless a policy replaced them. */
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
 * `repeats.found` is set when a top-level key occurs twice.
 */
export function topLevelSpans(raw: Buffer, repeats?: { found: boolean }): Map<string, [number, number]> | undefined {
  // The side-door policy and serializeBody both need them for one body: scanned once.
  const known = scanned.get(raw);
  if (known) {
    if (repeats && known.repeats) repeats.found = true;
    return known.spans;
  }
  const seen = { found: false };
  const spans = scanSpans(raw, seen);
  scanned.set(raw, { spans, repeats: seen.found });
  if (repeats && seen.found) repeats.found = true;
  return spans;
}

const scanned = new WeakMap<Buffer, { spans: Map<string, [number, number]> | undefined; repeats: boolean }>();

function scanSpans(raw: Buffer, repeats: { found: boolean }): Map<string, [number, number]> | undefined {
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
    if (spans.has(key)) repeats.found = true;
    spans.set(key, [start, end]);
    i = skipSpace(raw, end);
    if (raw[i] === 0x7d) return spans;
    if (raw[i] !== 0x2c) return undefined;
    i = skipSpace(raw, i + 1);
  }
}

/**
 * Whether any object in the JSON text `raw[start, end)` (well formed: it already parsed) names a key
 * twice, or names one with an escape (`"\u0074ype"`, which this does not decode: the caller treats it
 * like a duplicate). Parsers disagree on which duplicate wins, so a member the proxy's policy read is
 * copied as received only when this is false. Strings are skipped with memchr (stringEnd); keys are
 * compared by a 32-bit hash of their bytes, so two distinct keys whose hashes collide also answer
 * true — the safe answer (serialise from the parse), never a missed duplicate. Linear in the text:
 * an object's hashes go into a Set once it has more than a few keys.
 */
export function hasDuplicateKey(raw: Buffer, start = 0, end = raw.length): boolean {
  // Per open container: its key hashes so far, or null for an array.
  const stack: Array<number[] | Set<number> | null> = [];
  let expectKey = false;
  let j = start;
  while (j < end) {
    const c = raw[j] as number;
    if (c === QUOTE) {
      const close = stringEnd(raw, j);
      if (close < 0) return true;
      if (expectKey) {
        let h = 0;
        for (let k = j + 1; k < close - 1; k++) {
          const b = raw[k] as number;
          if (b === BACKSLASH) return true;
          h = (Math.imul(h, 31) + b) | 0;
        }
        const top = stack.length - 1;
        const keys = stack[top] as number[] | Set<number>;
        if (Array.isArray(keys)) {
          if (keys.includes(h)) return true;
          keys.push(h);
          if (keys.length > SMALL_OBJECT) stack[top] = new Set(keys);
        } else {
          if (keys.has(h)) return true;
          keys.add(h);
        }
        expectKey = false;
      }
      j = close;
      continue;
    }
    if (c === 0x7b) {
      stack.push([]);
      expectKey = true;
    } else if (c === 0x5b) {
      stack.push(null);
    } else if (c === 0x7d || c === 0x5d) {
      stack.pop();
    } else if (c === 0x2c) {
      expectKey = stack[stack.length - 1] !== null;
    }
    j++;
  }
  return false;
}

/** Keys an object may have before hasDuplicateKey looks them up in a Set instead of a list. */
const SMALL_OBJECT = 16;

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
 * the text the body was parsed from and its parse: members still holding a parsed value, and the
 * kept elements of a filtered array, are slices of `raw` where the rules above allow.
 */
export function serializeBody(body: Record<string, unknown>, source?: { raw: Buffer; parsed: Record<string, unknown> }): BodyParts {
  const spans = source && Object.keys(body).some((k) => isContainer(body[k]) && isContainer(source.parsed[k])) ? topLevelSpans(source.raw) : undefined;
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
    const span = spans.get(key);
    const copied = span ? copiedValue(key, value, source, span) : undefined;
    if (!copied) {
      text += JSON.stringify(value);
      continue;
    }
    for (const piece of copied) {
      if (typeof piece === 'string') text += piece;
      else {
        if (text) parts.push(Buffer.from(text));
        parts.push(piece);
        text = '';
      }
    }
  }
  parts.push(Buffer.from(`${text}}`));
  return parts;
}

/**
 * A member's value as pieces of received text (Buffers) and serialised text (strings), or undefined
 * when it must be serialised whole (json-body.ts header: which members may be copied).
 */
function copiedValue(key: string, value: unknown, source: { raw: Buffer; parsed: Record<string, unknown> }, [start, end]: [number, number]): Array<Buffer | string> | undefined {
  const original = source.parsed[key];
  const { raw } = source;
  if (!isContainer(value) || !isContainer(original)) return undefined;
  const unread = UNREAD_FIELDS.has(key);
  if (value === original && unread) return [raw.subarray(start, end)];
  const shape = unread ? shapeOf(raw, start, end) : rememberedShape(raw, start, end);
  if (shape.duplicate) return undefined;
  if (value === original) return [raw.subarray(start, end)];
  const elements = shape.elements;
  if (!Array.isArray(value) || !Array.isArray(original) || !elements || elements.length !== original.length) return undefined;
  const at = new Map<unknown, number>();
  original.forEach((v, i) => isContainer(v) && !at.has(v) && at.set(v, i));
  const pieces: Array<Buffer | string> = [];
  let text = '[';
  let next = 0;
  // A run of elements kept next to each other goes as one span, separators and all.
  let run: [number, number] | undefined;
  const endRun = () => {
    if (run) pieces.push(raw.subarray(run[0], run[1]));
    run = undefined;
  };
  for (let i = 0; i < value.length; i++) {
    const v: unknown = value[i];
    const k = at.get(v);
    // Kept elements stay in their order (a filter); anything else is serialised.
    if (k !== undefined && k >= next) {
      const span = elements[k] as [number, number];
      if (run && k === next) run[1] = start + span[1];
      else {
        endRun();
        pieces.push(i ? `${text},` : text);
        text = '';
        run = [start + span[0], start + span[1]];
      }
      next = k + 1;
    } else {
      endRun();
      text += `${i ? ',' : ''}${JSON.stringify(v) ?? 'null'}`;
    }
  }
  endRun();
  pieces.push(`${text}]`);
  return pieces;
}

/** What copying a member needs to know of its text: whether it names a key twice, and its elements' spans (relative to its start) if an array. */
interface MemberShape {
  duplicate: boolean;
  elements: Array<[number, number]> | undefined;
}

function shapeOf(raw: Buffer, start: number, end: number): MemberShape {
  const duplicate = hasDuplicateKey(raw, start, end);
  const text = raw.subarray(start, end);
  return { duplicate, elements: duplicate ? undefined : elementSpans(text, 0, text.length) };
}

/**
 * The shape of the last policy-read member looked at, by its exact bytes: an agent sends the same
 * tool list with every call of a run, and comparing bytes (memcmp) costs a fraction of reading them.
 */
let remembered: { text: Buffer; shape: MemberShape } | undefined;
const MAX_REMEMBERED = 1024 * 1024;

function rememberedShape(raw: Buffer, start: number, end: number): MemberShape {
  const text = raw.subarray(start, end);
  if (remembered?.text.equals(text)) return remembered.shape;
  const shape = shapeOf(raw, start, end);
  // A tool list is tens of KB; a member far larger is not worth holding a copy of.
  if (text.length <= MAX_REMEMBERED) remembered = { text: Buffer.from(text), shape };
  return shape;
}

/** The byte span of each element of the JSON array text `raw[start, end)`; undefined when it cannot be followed. */
function elementSpans(raw: Buffer, start: number, end: number): Array<[number, number]> | undefined {
  if (raw[start] !== 0x5b) return undefined;
  const spans: Array<[number, number]> = [];
  let i = skipSpace(raw, start + 1);
  if (raw[i] === 0x5d) return i + 1 === end ? spans : undefined;
  for (;;) {
    const e = valueEnd(raw, i);
    if (e < 0 || e > end) return undefined;
    spans.push([i, e]);
    i = skipSpace(raw, e);
    if (raw[i] === 0x5d) return i + 1 === end ? spans : undefined;
    if (raw[i] !== 0x2c) return undefined;
    i = skipSpace(raw, i + 1);
  }
}

function isContainer(v: unknown): v is object {
  return typeof v === 'object' && v !== null;
}
