/** One connection attempt through the egress proxy, allowed or denied; fired when it is over. */
export interface EgressEvent {
  id: string;
  runId: string;
  /** ISO time the attempt started. */
  at: string;
  /** The host name as requested (normalized when valid). Empty when the request could not be parsed. */
  host: string;
  port: number;
  /** `CONNECT` for tunnels, otherwise the HTTP method of a plain-HTTP request. */
  method: string;
  /** Whether the policy admitted it (an admitted attempt can still fail to connect: see `reason`). */
  allowed: boolean;
  /** Why it was refused or failed. */
  reason?: string;
  /** The checked address the proxy connected to. */
  address?: string;
  /** Bytes from the sandbox to the destination, and back (tunnel bytes, or HTTP body bytes). */
  bytesUp: number;
  bytesDown: number;
  durationMs: number;
  /** Set for a request the gateway intercepted (TLS terminated on the host): one event per request. */
  intercepted?: true;
  /** Intercepted requests: the path with query values redacted. */
  path?: string;
  /** Intercepted requests: the HTTP status the client got. */
  status?: number;
  /** Intercepted requests: the rule that decided. */
  rule?: string;
  /** Intercepted requests: the secret injected (or whose placeholder was misused), by name. */
  secret?: string;
}
