import { APP_ORIGIN } from './app-protocol';

/**
 * The web permissions the UI gets in Electron (docs/architecture.md §2.7): desktop notifications,
 * and writing to the clipboard (Copy / Copy all in terminals, Copy next to preview links). Reading
 * the clipboard, camera, microphone, geolocation, hid/serial/usb and everything else are refused,
 * both when a page requests them and when Chromium only checks (`setPermissionCheckHandler`, which
 * gates device access without any request; Electron's default answer to a check is "granted").
 */
const GRANTED = new Set(['notifications', 'clipboard-sanitized-write']);

export function grantsPermission(permission: string): boolean {
  return GRANTED.has(permission);
}

/**
 * The answer to a permission check: one of the granted permissions, asked by our own UI (its
 * app:// origin, or the dev server in a development build). Everything else is denied.
 */
export function passesPermissionCheck(permission: string, requestingOrigin: string | undefined, devServerUrl?: string): boolean {
  if (!grantsPermission(permission) || !requestingOrigin) return false;
  const origin = originOf(requestingOrigin);
  return origin !== undefined && (origin === APP_ORIGIN || (devServerUrl !== undefined && origin === originOf(devServerUrl)));
}

/** scheme://host of a URL (WHATWG gives `null` as the origin of a custom scheme such as app:). */
function originOf(url: string): string | undefined {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}`;
  } catch {
    return undefined;
  }
}
