/**
 * What of a live chunk (UTF-8 bytes) is new to a view that replayed the log up to `replayedTo`
 * bytes: nothing when the chunk ends there or before, its tail when it straddles that point, all
 * of it otherwise. Chunks without an `end` (an older host) are taken whole.
 */
export function newPart(data: Uint8Array, end: number | undefined, replayedTo: number): Uint8Array {
  if (end === undefined) return data;
  if (end <= replayedTo) return data.subarray(data.length);
  const start = end - data.length;
  return start >= replayedTo ? data : data.subarray(replayedTo - start);
}
