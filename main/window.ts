import { BrowserWindow, shell } from 'electron';
import { externalLinkUrl, type LinkablePreview } from '../contracts/external-links';
import { APP_INDEX_URL } from './app-protocol';
import { contentSecurityPolicy } from './csp';
import { passesPermissionCheck } from './permissions';
import { LOCKED_DOWN_PREFERENCES } from './web-preferences';
import type { WindowPaths } from './window-paths';

/**
 * Creates the main window: locked down, no navigation, no new windows, permissions denied but the
 * two the UI uses (requests and checks), the UI loaded from app:// with its one CSP. `previews` lists
 * the ports live runs have published: the only loopback links that open.
 */
export function createMainWindow(paths: WindowPaths, previews: () => readonly LinkablePreview[] = () => []): BrowserWindow {
  const win = new BrowserWindow({
    width: 1280,
    height: 840,
    minWidth: 900,
    minHeight: 600,
    show: false,
    title: 'Airlock',
    backgroundColor: '#0f1216',
    webPreferences: { ...LOCKED_DOWN_PREFERENCES, preload: paths.preload },
  });
  const wc = win.webContents;
  // app:// responses carry the CSP themselves (main/app-protocol.ts); the dev server's get it here.
  if (paths.devServerUrl) {
    wc.session.webRequest.onHeadersReceived((details, callback) => {
      callback({ responseHeaders: { ...details.responseHeaders, 'Content-Security-Policy': [contentSecurityPolicy(true)] } });
    });
  }
  // The UI never navigates: links to the web, and ports live runs have published (checked here
  // again, on the host), open in the user's browser; everything else is refused
  // (contracts/external-links.ts).
  const openOutside = (raw: string) => {
    const url = externalLinkUrl(raw, previews());
    if (url) void shell.openExternal(url);
  };
  wc.on('will-navigate', (e, url) => {
    e.preventDefault();
    openOutside(url);
  });
  wc.on('will-redirect', (e) => e.preventDefault());
  wc.setWindowOpenHandler(({ url }) => {
    openOutside(url);
    return { action: 'deny' };
  });
  wc.on('will-attach-webview', (e) => e.preventDefault());
  wc.session.setPermissionRequestHandler((_wc, permission, callback, details) => callback(passesPermissionCheck(permission, details.requestingUrl, paths.devServerUrl)));
  wc.session.setPermissionCheckHandler((_wc, permission, requestingOrigin) => passesPermissionCheck(permission, requestingOrigin, paths.devServerUrl));
  win.once('ready-to-show', () => win.show());
  void win.loadURL(paths.devServerUrl ?? APP_INDEX_URL);
  return win;
}
