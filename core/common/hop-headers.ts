/**
 * Hop-by-hop headers (RFC 9110 §7.6.1): they describe one connection and are never forwarded by a
 * proxy, nor is any header the `Connection` header names. Shared by the egress proxy, the egress
 * gateway and the model proxy's upstream client.
 */
export const HOP_BY_HOP: ReadonlySet<string> = new Set([
  'connection',
  'proxy-connection',
  'keep-alive',
  'proxy-authorization',
  'proxy-authenticate',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'http2-settings',
]);

/** Every value of header `name` (any case) in Node's flat `rawHeaders` list. */
export function rawHeaderValues(rawHeaders: readonly string[], name: string): string[] {
  const out: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) if ((rawHeaders[i] as string).toLowerCase() === name) out.push(rawHeaders[i + 1] as string);
  return out;
}

/**
 * `rawHeaders` without hop-by-hop headers and those the `Connection` header lists, names and order
 * kept. `keepUpgrade` keeps `Upgrade` and `Connection` (a WebSocket handshake being relayed).
 */
export function endToEndHeaders(rawHeaders: readonly string[], keepUpgrade = false): string[] {
  const listed = new Set(
    rawHeaderValues(rawHeaders, 'connection')
      .flatMap((v) => v.split(','))
      .map((v) => v.trim().toLowerCase()),
  );
  const out: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const lower = (rawHeaders[i] as string).toLowerCase();
    const hop = HOP_BY_HOP.has(lower) || listed.has(lower);
    if (hop && !(keepUpgrade && (lower === 'upgrade' || lower === 'connection'))) continue;
    out.push(rawHeaders[i] as string, rawHeaders[i + 1] as string);
  }
  return out;
}
