import { createReadStream } from 'node:fs';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { extract, type Header } from 'tar-stream';
import { AirlockError } from '../../contracts/errors';

/** The folders a prepared state may hold, relative to `/` as the capture's tar names them. */
const ROOTS = ['workspace', 'home/airlock'];
const KINDS = new Set(['file', 'directory', 'symlink', 'link']);

/**
 * Checks, on the host, the tar a sandbox sent as its prepared state before the engine extracts it
 * into an image (docs/architecture.md §16, "Prepared environments"). The engine's archive API
 * resolves an entry's parent folders inside the image's root, following a symlink the same tar
 * made: `home/airlock/x -> /opt/airlock` then `home/airlock/x/helper.js` would write over Airlock's
 * own runtime in the prepared image. So every entry must be under the captured folders, with no `..`,
 * no absolute name, no parent (or hard-link target) that is a link of the archive, and be a plain
 * file, folder, symlink or hard link (no device nodes). The symlinks themselves are kept as they are:
 * they are restored inside the next sandbox by its own user, who could have made them anyway.
 */
export async function checkPreparedTar(file: string): Promise<void> {
  const links = new Set<string>();
  const files = new Set<string>();
  const refuse = (name: string, why: string): never => {
    throw new AirlockError('SANDBOX_FAILED', `the prepared state's entry '${name.slice(0, 300)}' ${why}; nothing was kept`);
  };
  const check = (raw: string, what: string): string => {
    const name = raw.replace(/\/+$/, '');
    if (name.startsWith('/') || name.split('/').some((s) => s === '..' || s === '.' || s === '')) refuse(raw, `is not a plain relative path (${what})`);
    if (!ROOTS.some((r) => name.startsWith(`${r}/`))) refuse(raw, `is outside ${ROOTS.join(' and ')} (${what})`);
    for (let d = path.posix.dirname(name); d !== '.'; d = path.posix.dirname(d)) {
      if (links.has(d)) refuse(raw, `lies under '${d}', a link of the same archive (${what}): the engine would write through it`);
    }
    return name;
  };
  const x = extract();
  const walk = (async () => {
    for await (const entry of x) {
      const h: Header = entry.header;
      const type = h.type ?? 'file';
      if (!KINDS.has(type)) refuse(h.name, `is a ${type}, not a file, folder or link`);
      const name = check(h.name, 'its name');
      if (type === 'link') {
        const target = check(h.linkname ?? '', 'its hard-link target');
        if (!files.has(target)) refuse(h.name, `is a hard link to '${target.slice(0, 300)}', which is no file earlier in the archive`);
      }
      if (type === 'symlink' || type === 'link') links.add(name);
      if (type === 'file') files.add(name);
      entry.resume();
    }
  })().catch((err: unknown) => {
    x.destroy(err instanceof Error ? err : new Error(String(err)));
    throw err;
  });
  await Promise.all([pipeline(createReadStream(file), x), walk]);
}
