const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * What of a live chunk is new to a view that replayed the log up to `replayedTo` bytes: nothing
 * when the chunk ends there or before, its tail when it straddles that point, all of it otherwise.
 * Chunks without an `end` (an older host) are taken whole.
 */
export function newPart(data: string, end: number | undefined, replayedTo: number): string {
  if (end === undefined) return data;
  if (end <= replayedTo) return '';
  // A string of n characters is n..3n UTF-8 bytes: only encode when it may straddle.
  if (end - 3 * data.length >= replayedTo) return data;
  const bytes = encoder.encode(data);
  const start = end - bytes.length;
  return start >= replayedTo ? data : decoder.decode(bytes.subarray(replayedTo - start));
}
