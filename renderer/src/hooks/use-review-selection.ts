import { useEffect, useMemo, useState } from 'react';
import type { ChangedFile, FileSelection } from '../../../contracts';
import { defaultSelection } from '../lib/file-tree';
import { fileSelectionOf, hunkIds } from '../lib/selection';
import type { Hunk } from '../lib/unified-diff';

/** Risky files the user is asked about before they are ticked, and what ticking them does. */
export interface PendingRisky {
  paths: string[];
  then(): void;
}

/** What apply and the patch preview send: whole files, and hunks / lines of the partly picked ones. */
export interface SelectionRequest {
  files: string[];
  selection: FileSelection[];
}

/** The review screen's selection of files, hunks and lines, and its rules. */
export interface ReviewSelection {
  selected: ReadonlySet<string>;
  /** The file whose diff is shown. */
  focused: string | undefined;
  focus(path: string): void;
  /** A risky file about to be ticked: the screen asks, then `confirm` or `cancel`. */
  pending: PendingRisky | undefined;
  confirm(): void;
  cancel(): void;
  /** Ticks a file whole, or unticks it. */
  toggle(path: string): void;
  selectAll(): void;
  selectNone(): void;
  /** Ticks or unticks changes (line ids, lib/selection.ts) of one file. */
  setLines(path: string, ids: string[], on: boolean): void;
  /** Whether a ticked file is taken only in part. */
  isPartial(path: string): boolean;
  /** The picked change ids of a file: undefined when it is taken whole, empty when not at all. */
  pickedOf(path: string): ReadonlySet<string> | undefined;
  request: SelectionRequest;
  /** Changes whenever the request does (the patch preview and the last apply are matched by it). */
  requestKey: string;
}

/**
 * Selection rules of Review & apply (docs/architecture.md §11, "Picking hunks and lines"): risky files
 * are not pre-selected and ticking one — whole, with Select all, or a line of it — asks first; a file
 * with every change picked is taken whole and one with none is left out; a new result (`resetKey`)
 * starts over from the default selection.
 */
export function useReviewSelection({ files, hunksOf, resetKey }: {
  /** The changed files in review order. */
  files: readonly ChangedFile[];
  /** The hunks of a file whose diff is loaded. */
  hunksOf(path: string): Hunk[] | undefined;
  resetKey: string;
}): ReviewSelection {
  const [selected, setSelected] = useState<Set<string>>(new Set());
  /** Partly picked files: the change ids picked; a file not here is taken whole. */
  const [picks, setPicks] = useState<Record<string, Set<string>>>({});
  const [pending, setPending] = useState<PendingRisky>();
  const [focused, setFocused] = useState<string>();

  // Only a new result resets (not a refetch of the same one, e.g. after an apply); `files` is that result.
  useEffect(() => {
    setSelected(defaultSelection(files));
    setPicks({});
    setPending(undefined);
    setFocused((f) => f ?? files[0]?.path);
  }, [resetKey]);

  const riskyOf = useMemo(() => new Map(files.map((f) => [f.path, f.risky])), [files]);
  /** Runs `then` now, or after the user confirms ticking the risky files among `paths`. */
  const confirmRisky = (paths: string[], then: () => void) => {
    const risky = paths.filter((p) => riskyOf.get(p) && !selected.has(p));
    if (risky.length) setPending({ paths: risky, then });
    else then();
  };
  const setFile = (path: string, on: boolean) => {
    setPicks(({ [path]: _, ...rest }) => rest);
    setSelected((s) => {
      const next = new Set(s);
      if (on) next.add(path);
      else next.delete(path);
      return next;
    });
  };
  const idsOf = (path: string): string[] => hunksOf(path)?.flatMap(hunkIds) ?? [];
  const setLines = (path: string, ids: string[], on: boolean) => {
    const all = idsOf(path);
    const now = new Set(selected.has(path) ? (picks[path] ?? all) : []);
    for (const id of ids) {
      if (on) now.add(id);
      else now.delete(id);
    }
    const commit = () => {
      if (now.size === 0) return setFile(path, false);
      setSelected((s) => new Set(s).add(path));
      setPicks(({ [path]: _, ...rest }) => (now.size === all.length ? rest : { ...rest, [path]: now }));
    };
    if (on) confirmRisky([path], commit);
    else commit();
  };

  const request = useMemo((): SelectionRequest => {
    const selection: FileSelection[] = [];
    for (const [path, ids] of Object.entries(picks)) {
      const hunks = hunksOf(path);
      if (!selected.has(path) || !hunks) continue;
      const sel = fileSelectionOf(path, hunks, ids);
      if (typeof sel === 'object') selection.push(sel);
    }
    return { files: files.filter((f) => selected.has(f.path)).map((f) => f.path), selection };
  }, [picks, selected, files, hunksOf]);

  return {
    selected,
    focused,
    focus: setFocused,
    pending,
    confirm: () => {
      pending?.then();
      setPending(undefined);
    },
    cancel: () => setPending(undefined),
    toggle: (path) => (selected.has(path) ? setFile(path, false) : confirmRisky([path], () => setFile(path, true))),
    selectAll: () => confirmRisky(files.map((f) => f.path), () => {
      setPicks({});
      setSelected(new Set(files.map((f) => f.path)));
    }),
    selectNone: () => {
      setPicks({});
      setSelected(new Set());
    },
    setLines,
    isPartial: (path) => picks[path] !== undefined && selected.has(path),
    pickedOf: (path) => (selected.has(path) ? picks[path] : new Set<string>()),
    request,
    requestKey: JSON.stringify(request),
  };
}
