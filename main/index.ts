import { app, BrowserWindow, dialog, type IpcMainEvent, type IpcMainInvokeEvent } from 'electron';
import { createApiRouter } from '../core/api/router';
import type { AirlockServices } from '../core/api/services';
import { createAirlockServices } from '../core/app-services';
import { resourcePaths } from '../core/common/resources';
import { registerIpcRouter } from './ipc-router';
import { installMenu } from './menu';
import { withPatchSaveDialog } from './save-patch';
import { isTrustedRendererUrl } from './sender-policy';
import { createMainWindow, rendererFileUrl, windowPaths } from './window';

/**
 * The Electron composition root: one core, one window, one IPC router. Everything else lives in
 * core/ (Electron-free) and renderer/ (a plain web page).
 */
if (!app.requestSingleInstanceLock()) {
  app.quit();
} else {
  let services: AirlockServices | undefined;
  let win: BrowserWindow | undefined;
  let quitting = false;
  const paths = windowPaths(resourcePaths());
  const trusted = { rendererFileUrl: rendererFileUrl(paths), devServerUrl: paths.devServerUrl };

  const isTrustedSender = (event: IpcMainEvent | IpcMainInvokeEvent) =>
    Boolean(win && !win.isDestroyed() && event.sender.id === win.webContents.id && event.senderFrame && event.senderFrame === event.sender.mainFrame
      && isTrustedRendererUrl(event.senderFrame.url, trusted));

  app.on('second-instance', () => {
    if (!win) return;
    if (win.isMinimized()) win.restore();
    win.focus();
  });

  app.on('web-contents-created', (_e, contents) => {
    // Defence in depth for any web contents, not just our window.
    contents.setWindowOpenHandler(() => ({ action: 'deny' }));
    contents.on('will-attach-webview', (e) => e.preventDefault());
  });

  // Quitting with runs in progress asks first, then cancels and wipes them.
  app.on('before-quit', (e) => {
    if (quitting || !services) return;
    e.preventDefault();
    void (async () => {
      const active = await services.activeRunIds().catch(() => [] as string[]);
      if (active.length) {
        const { response } = await dialog.showMessageBox({
          type: 'warning',
          buttons: ['Stop runs and quit', 'Keep running'],
          defaultId: 1,
          cancelId: 1,
          message: `${active.length} run(s) still in progress`,
          detail: 'Quitting stops them, keeps what they changed so far for review, and wipes their sandboxes.',
        });
        if (response !== 0) return;
      }
      quitting = true;
      await services.dispose().catch(() => {});
      app.quit();
    })();
  });

  app.on('window-all-closed', () => {
    if (process.platform !== 'darwin') app.quit();
  });

  void app.whenReady().then(async () => {
    installMenu(process.platform === 'darwin');
    try {
      services = await createAirlockServices({
        env: process.env,
        // The system folder dialog for the New run form (`projects:pickFolder`).
        pickFolder: async (defaultPath) => {
          const options = { properties: ['openDirectory' as const], ...(defaultPath ? { defaultPath } : {}) };
          const r = win && !win.isDestroyed() ? await dialog.showOpenDialog(win, options) : await dialog.showOpenDialog(options);
          return r.canceled ? null : (r.filePaths[0] ?? null);
        },
      });
    } catch (err) {
      dialog.showErrorBox('Airlock could not start', err instanceof Error ? err.message : String(err));
      app.exit(1);
      return;
    }
    registerIpcRouter(createApiRouter(withPatchSaveDialog(services, () => win)), { isTrustedSender });
    const previews = () => services?.previewPorts() ?? [];
    win = createMainWindow(paths, previews);
    app.on('activate', () => {
      if (BrowserWindow.getAllWindows().length === 0) win = createMainWindow(paths, previews);
    });
  });
}
