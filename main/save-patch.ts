import { dialog, type BrowserWindow, type SaveDialogOptions } from 'electron';
import { AirlockError } from '../contracts/errors';
import type { AirlockServices, DiffsService } from '../core/api/services';

/**
 * The services the window talks to, with `diffs:savePatch` answered by a native save dialog: the
 * user picks the file in the main process (the renderer never names a path), and the patch the
 * host renders for the selection is written there through `diffs:exportPatch`, which records it
 * in the run's apply log. The window's own `diffs:exportPatch` may copy a patch but never name a
 * host path (`destPath`): a compromised page must not write files where it likes.
 */
export function withPatchSaveDialog(services: AirlockServices, parent: () => BrowserWindow | undefined): AirlockServices {
  const diffs: DiffsService = {
    ...services.diffs,
    async exportPatch(input) {
      if (input.destPath !== undefined) {
        throw new AirlockError('FORBIDDEN', 'The window may not name a file on this computer. Use "Save patch…" (a save dialog), or copy the patch.');
      }
      return services.diffs.exportPatch(input);
    },
    async savePatch({ runId, scope, checkpoint, files, selection }) {
      const options: SaveDialogOptions = {
        title: 'Save patch',
        defaultPath: `airlock-${runId}.patch`,
        filters: [{ name: 'Patch', extensions: ['patch', 'diff'] }],
        properties: ['createDirectory', 'showOverwriteConfirmation'],
      };
      const win = parent();
      const { canceled, filePath } = win && !win.isDestroyed() ? await dialog.showSaveDialog(win, options) : await dialog.showSaveDialog(options);
      if (canceled || !filePath) return { saved: false };
      const out = await services.diffs.exportPatch({ runId, ...(scope ? { scope } : {}), ...(checkpoint !== undefined ? { checkpoint } : {}), ...(files ? { files } : {}), ...(selection ? { selection } : {}), destPath: filePath });
      return { saved: true, path: out.path, bytes: out.bytes, ...(out.sha256 ? { sha256: out.sha256 } : {}) };
    },
  };
  return { ...services, diffs };
}
