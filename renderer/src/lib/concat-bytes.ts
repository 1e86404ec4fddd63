/** Joins byte arrays into one (one copy). */
export function concatBytes(parts: Uint8Array[], total = parts.reduce((n, p) => n + p.length, 0)): Uint8Array {
  const out = new Uint8Array(total);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
