/** Formatting shared by the core (CLI, messages) and the renderer; pure, no imports. */

/** A byte count for people: `512 B`, `4.0 KiB`, `1.5 MiB`, `2.00 GiB`. */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 ** 2) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1024 ** 3) return `${(n / 1024 ** 2).toFixed(1)} MiB`;
  return `${(n / 1024 ** 3).toFixed(2)} GiB`;
}
