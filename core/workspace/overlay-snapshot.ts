import type { GitMode } from './git-objects';
import type { ProjectSnapshot, SnapshotEntry } from './snapshot';

/** One file of an earlier result laid over the project: its bytes and mode, or its removal. */
export type OverlayFile = { path: string; mode: GitMode; content: Buffer } | { path: string; delete: true };

/**
 * The project as read, with an earlier result laid over it (a follow-up turn starts from the
 * previous turn's result, docs/architecture.md §15). The overlaid bytes come from the host's own
 * store, never from a sandbox or the project folder; they are streamed as they are (no exclusion
 * rules: they were a result already). Ignore rules and exclusions of the project stay as read.
 */
export function overlaySnapshot(snapshot: ProjectSnapshot, files: OverlayFile[], now = Date.now()): ProjectSnapshot {
  const touched = new Set(files.map((f) => f.path));
  const added = files.filter((f): f is Exclude<OverlayFile, { delete: true }> => !('delete' in f));
  // A file the result put where the project has a folder replaces the folder.
  const shadowed = (p: string) => added.some((f) => p === f.path || p.startsWith(`${f.path}/`));
  const entries: SnapshotEntry[] = snapshot.entries.filter((e) => !touched.has(e.path) && !(e.type === 'dir' && shadowed(e.path)));
  const dirs = new Set(entries.filter((e) => e.type === 'dir').map((e) => e.path));
  for (const f of added) {
    const parts = f.path.split('/');
    for (let i = 1; i < parts.length; i++) {
      const dir = parts.slice(0, i).join('/');
      if (dirs.has(dir)) continue;
      dirs.add(dir);
      entries.push({ path: dir, type: 'dir', mode: 0o755, size: 0, mtimeMs: now });
    }
    if (f.mode === '120000') entries.push({ path: f.path, type: 'symlink', mode: 0o777, size: f.content.length, mtimeMs: now, linkTarget: f.content.toString('utf8') });
    else entries.push({ path: f.path, type: 'file', mode: f.mode === '100755' ? 0o755 : 0o644, size: f.content.length, mtimeMs: now, content: f.content });
  }
  const sizes = entries.filter((e) => e.type !== 'dir');
  return { ...snapshot, entries, fileCount: sizes.length, totalBytes: sizes.reduce((n, e) => n + e.size, 0) };
}
