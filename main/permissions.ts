/**
 * The web permissions the UI gets in Electron (docs/architecture.md §2.7): desktop notifications,
 * and writing to the clipboard (Copy / Copy all in terminals, Copy next to preview links). Reading
 * the clipboard, camera, microphone, geolocation and everything else are refused.
 */
const GRANTED = new Set(['notifications', 'clipboard-sanitized-write']);

export function grantsPermission(permission: string): boolean {
  return GRANTED.has(permission);
}
