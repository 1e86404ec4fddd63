import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { BrowserWindow, shell } from 'electron';
import { externalLinkUrl, type LinkablePreview } from '../contracts/external-links';
import type { ResourcePaths } from '../core/common/resources';
import { contentSecurityPolicy } from './csp';
import { grantsPermission } from './permissions';
import { LOCKED_DOWN_PREFERENCES } from './web-preferences';

export interface WindowPaths {
  preload: string;
  rendererIndex: string;
  devServerUrl?: string;
}

/** The built preload and UI, as core/common/resources.ts finds them (checkout or packaged app). */
export function windowPaths(resources: Pick<ResourcePaths, 'preloadFile' | 'rendererDir'>): WindowPaths {
  return {
    preload: resources.preloadFile,
    rendererIndex: join(resources.rendererDir, 'index.html'),
    devServerUrl: process.env.ELECTRON_RENDERER_URL,
  };
}

export function rendererFileUrl(paths: WindowPaths): string {
  return pathToFileURL(paths.rendererIndex).href;
}


/**
 * Creates the main window: locked down, no navigation, no new windows, CSP on every response.
 * `previews` lists the ports live runs have published: the only loopback links that open.
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
  wc.session.webRequest.onHeadersReceived((details, callback) => {
    callback({ responseHeaders: { ...details.responseHeaders, 'Content-Security-Policy': [contentSecurityPolicy(Boolean(paths.devServerUrl))] } });
  });
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
  wc.session.setPermissionRequestHandler((_wc, permission, callback) => callback(grantsPermission(permission)));
  win.once('ready-to-show', () => win.show());
  if (paths.devServerUrl) void win.loadURL(paths.devServerUrl);
  else void win.loadFile(paths.rendererIndex);
  return win;
}
