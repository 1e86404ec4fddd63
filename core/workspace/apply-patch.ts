import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { AirlockError } from '../../contracts/errors';
import { sha256Hex } from '../common/sha256';
import { sectionsOf, selectChanges, type StoredResult } from './collect';

export interface ExportPatchOptions {
  patch: Buffer;
  result: StoredResult;
  /** Where to write; an existing file is never overwritten unless `overwrite`. */
  file: string;
  files?: string[];
  overwrite?: boolean;
}

/** Writes the result patch (or the sections of selected files) to a file for `git apply` elsewhere. */
export async function exportPatch(opts: ExportPatchOptions): Promise<{ file: string; bytes: number; paths: string[]; sha256: string }> {
  const selected = selectChanges(opts.result, opts.files);
  const body = sectionsOf(opts.patch, selected);
  const file = path.resolve(opts.file);
  try {
    await writeFile(file, body, { flag: opts.overwrite ? 'w' : 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') throw new AirlockError('CONFLICT', `${file} already exists; choose another name or allow overwriting.`);
    throw err;
  }
  return { file, bytes: body.length, paths: selected.map((c) => c.path), sha256: sha256Hex(body) };
}
