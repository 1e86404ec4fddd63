import { app, BrowserWindow, dialog, protocol, shell, type IpcMainEvent, type IpcMainInvokeEvent } from 'electron';
import { createApiRouter } from '../core/api/router';
import type { AirlockServices } from '../core/api/services';
import { createAirlockServices } from '../core/app-services';
import { debugLog } from '../core/common/debug-log';
import { resourcePaths } from '../core/common/resources';
import { APP_SCHEME, APP_SCHEME_PRIVILEGES, appProtocolHandler } from './app-protocol';
import { contentSecurityPolicy } from './csp';
import { registerIpcRouter } from './ipc-router';
import { installMenu } from './menu';
import { withPatchSaveDialog } from './save-patch';
import { isTrustedRendererUrl } from './sender-policy';
import { createMainWindow } from './window';
import { windowPaths } from './window-paths';

/**
 * The Electron composition root: one core, one window, one IPC router. Everything else lives in
 * core/ (Electron-free) and renderer/ (a plain web page).
 */
// The UI's origin (main/app-protocol.ts); schemes are registered before the app is ready.
protocol.registerSchemesAsPrivileged([{ scheme: APP_SCHEME, privileges: APP_SCHEME_PRIVILEGES }]);

if (!app.requestSingleInstanceLock()) {
  app.quit();
} else {
  let services: AirlockServices | undefined;
  let win: BrowserWindow | undefined;
  let quitting = false;
  const paths = windowPaths(resourcePaths(), { packaged: app.isPackaged });
  const trusted = { devServerUrl: paths.devServerUrl };
  let ready = false;

  /** The window, re-created when it was closed (a second launch, the Dock, "Keep running"). */
  const showWindow = () => {
    if (!ready) return;
    if (!win || win.isDestroyed()) {
      // The ports live runs have published: the only loopback links the window opens.
      win = createMainWindow(paths, () => services?.previewPorts() ?? []);
      return;
    }
    if (win.isMinimized()) win.restore();
    win.show();
    win.focus();
  };

  const isTrustedSender = (event: IpcMainEvent | IpcMainInvokeEvent) =>
    Boolean(win && !win.isDestroyed() && event.sender.id === win.webContents.id && event.senderFrame && event.senderFrame === event.sender.mainFrame
      && isTrustedRendererUrl(event.senderFrame.url, trusted));

  // A second launch brings the app back, also after its window was closed with runs kept running.
  app.on('second-instance', showWindow);

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
        // Kept running: the window comes back (closing it is what asked to quit on Windows and Linux).
        if (response !== 0) {
          showWindow();
          return;
        }
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
    // AIRLOCK_DEBUG: an unexpected error's stack goes to the terminal that started the app (for the app's lifetime).
    if (process.env.AIRLOCK_DEBUG) debugLog.onDidStack((s) => process.stderr.write(`[debug] ${s.where}: ${s.stack}\n`));
    try {
      services = await createAirlockServices({
        env: process.env,
        // The system folder dialog for the New run form (`projects:pickFolder`).
        pickFolder: async (defaultPath) => {
          const options = { properties: ['openDirectory' as const], ...(defaultPath ? { defaultPath } : {}) };
          const r = win && !win.isDestroyed() ? await dialog.showOpenDialog(win, options) : await dialog.showOpenDialog(options);
          return r.canceled ? null : (r.filePaths[0] ?? null);
        },
        // An MCP server's sign-in page (`mcpServers:login`): the core checked it is https or loopback http.
        openExternal: (url) => shell.openExternal(url),
      });
    } catch (err) {
      dialog.showErrorBox('Airlock could not start', err instanceof Error ? err.message : String(err));
      app.exit(1);
      return;
    }
    protocol.handle(APP_SCHEME, appProtocolHandler(paths.rendererDir, contentSecurityPolicy(false)));
    registerIpcRouter(createApiRouter(withPatchSaveDialog(services, () => win)), { isTrustedSender });
    ready = true;
    showWindow();
    app.on('activate', () => {
      if (BrowserWindow.getAllWindows().length === 0) showWindow();
    });
  });
}
