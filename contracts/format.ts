/** Formatting shared by the core (CLI, messages) and the renderer; pure, no imports. */

/** A byte count for people: `512 B`, `4.0 KiB`, `1.5 MiB`, `2.00 GiB`. */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 ** 2) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1024 ** 3) return `${(n / 1024 ** 2).toFixed(1)} MiB`;
  return `${(n / 1024 ** 3).toFixed(2)} GiB`;
}

/**
 * The sandbox hit its cap of connections open at once into the host's services (a
 * `connections_refused` event or audit record), in words: what was refused, and that it was.
 */
export function connectionsRefusedText(service: string, limit: number, refused: number, ended: boolean): string {
  return ended
    ? `${refused} connections from the sandbox to the ${service} were refused while it had ${limit} open at once (its limit); connections are accepted again`
    : `The sandbox has ${limit} connections open into the host at once (its limit): a new connection to the ${service} was refused`;
}
