import type { Transform } from 'node:stream';
import zlib from 'node:zlib';

/**
 * A response from a secret-bound host must be read before it is relayed (docs/architecture.md §2.8):
 * the gateway asks for `Accept-Encoding: identity`, and a server that compresses anyway is decoded
 * here so the scrubber sees plain bytes. An encoding the gateway cannot decode is refused, never
 * relayed unread.
 */

/** The decoders for a `Content-Encoding` value (applied in order), or the encoding that cannot be read. */
export function decodersFor(contentEncoding: string | undefined): { decoders: Transform[] } | { unreadable: string } {
  if (!contentEncoding) return { decoders: [] };
  // Encodings are listed in the order they were applied; undo them last first.
  const codings = contentEncoding
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c && c !== 'identity')
    .reverse();
  const decoders: Transform[] = [];
  // Lenient about a missing end (an empty body of a 204 or a HEAD says gzip too): decode what came.
  const lenient = { finishFlush: zlib.constants.Z_SYNC_FLUSH };
  for (const c of codings) {
    if (c === 'gzip' || c === 'x-gzip') decoders.push(zlib.createGunzip(lenient));
    else if (c === 'deflate') decoders.push(zlib.createInflate(lenient));
    else if (c === 'br') decoders.push(zlib.createBrotliDecompress({ finishFlush: zlib.constants.BROTLI_OPERATION_FLUSH }));
    else {
      for (const d of decoders) d.destroy();
      return { unreadable: c.slice(0, 40) };
    }
  }
  return { decoders };
}

/** The `Content-Encoding` of a flat header list, all values joined. */
export function contentEncodingOf(raw: readonly string[]): string | undefined {
  const values: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) if ((raw[i] as string).toLowerCase() === 'content-encoding') values.push(raw[i + 1] as string);
  return values.length ? values.join(', ') : undefined;
}
