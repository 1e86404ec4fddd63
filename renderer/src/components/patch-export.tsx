import { useState } from 'react';
import { PATCH_DOWNLOAD_PATH, PATCH_SHA256_HEADER, type ChangeScope, type FileSelection } from '../../../contracts';
import { errorMessage } from '../api';
import { isDesktopApp } from '../stores/app-store';
import { scopeArgs, useDiffStore, type ViewScope } from '../stores/diff-store';

/** The browser download: the host renders the selection's patch and sends it as an attachment. */
async function downloadPatch(body: { runId: string; scope?: ChangeScope; checkpoint?: number; files: string[]; selection?: FileSelection[] }): Promise<{ name: string; sha256: string }> {
  // The session cookie carries the token; the browser sends our Origin with a POST.
  const res = await fetch(PATCH_DOWNLOAD_PATH, { method: 'POST', credentials: 'same-origin', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  if (!res.ok) throw new Error((await res.text()).trim() || `Download failed (HTTP ${res.status}).`);
  const name = /filename="([^"]+)"/.exec(res.headers.get('content-disposition') ?? '')?.[1] ?? `airlock-${body.runId}.patch`;
  const url = URL.createObjectURL(await res.blob());
  try {
    const a = document.createElement('a');
    a.href = url;
    a.download = name;
    document.body.append(a);
    a.click();
    a.remove();
  } finally {
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  }
  return { name, sha256: res.headers.get(PATCH_SHA256_HEADER) ?? '' };
}

/**
 * Export the selection's patch to keep: a native save dialog in the desktop app, a download in a
 * browser, or the clipboard. The bytes are the host's rendering of the selection, and every
 * export is recorded in the run's apply log.
 */
export function PatchExport({ runId, scope, files, selection, disabled, onError }: { runId: string; scope?: ViewScope; files: string[]; selection: FileSelection[]; disabled: boolean; onError(message: string | undefined): void }) {
  const [note, setNote] = useState<string>();
  const body = { runId, ...scopeArgs(scope), files, ...(selection.length ? { selection } : {}) };
  const desktop = isDesktopApp();
  const { savePatch, exportPatch } = useDiffStore.getState();
  const run = (fn: () => Promise<string | undefined>) => () => {
    onError(undefined);
    setNote(undefined);
    fn().then(setNote, (err: unknown) => onError(errorMessage(err)));
  };
  const save = run(async () => {
    const r = await savePatch(body);
    return r.saved ? `Patch saved to ${r.path} (sha256 ${r.sha256?.slice(0, 16)}…)` : undefined;
  });
  const download = run(async () => {
    const r = await downloadPatch(body);
    return `Downloaded ${r.name} (sha256 ${r.sha256.slice(0, 16)}…)`;
  });
  const copy = run(async () => {
    const r = await exportPatch({ ...body, to: 'clipboard' });
    if (r.text === undefined) throw new Error('The patch is too large for the clipboard; save it instead.');
    await navigator.clipboard.writeText(r.text);
    return `Patch copied (sha256 ${r.sha256?.slice(0, 16)}…)`;
  });
  return (
    <>
      {desktop
        ? <button className="btn" onClick={save} disabled={disabled}>Save patch…</button>
        : <button className="btn" onClick={download} disabled={disabled}>Download patch</button>}
      <button className="btn" onClick={copy} disabled={disabled}>Copy patch</button>
      {note && <span className="muted" role="status" aria-label="Export result">{note}</span>}
    </>
  );
}
