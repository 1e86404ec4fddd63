import type { FileImages, ImageMime, ImageSide } from '../../contracts/diffs';
import { AirlockError } from '../../contracts/errors';
import type { StoredResult } from './collect';
import { ZERO_OID } from './git-objects';
import type { HostRepo } from './host-repo';

/**
 * The format of a picture from its own bytes (magic numbers; SVG: an `<svg` root element after an
 * optional prolog). A file name or anything the sandbox said plays no part: a `.png` holding HTML
 * is not an image, and only these five are ever labelled as one.
 */
export function sniffImage(buf: Buffer): ImageMime | undefined {
  if (buf.length >= 8 && buf.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))) return 'image/png';
  if (buf.length >= 3 && buf[0] === 0xff && buf[1] === 0xd8 && buf[2] === 0xff) return 'image/jpeg';
  if (buf.length >= 6 && /^GIF8[79]a$/.test(buf.subarray(0, 6).toString('latin1'))) return 'image/gif';
  if (buf.length >= 12 && buf.subarray(0, 4).toString('latin1') === 'RIFF' && buf.subarray(8, 12).toString('latin1') === 'WEBP') return 'image/webp';
  // SVG is text: skip a BOM, the XML declaration, comments and a doctype, then expect the root element.
  const head = buf.subarray(0, 4096).toString('utf8').replace(/^\uFEFF/, '');
  const rest = head.replace(/^(\s+|<\?xml[\s\S]*?\?>|<!--[\s\S]*?-->|<!DOCTYPE[^>]*>)*/i, '');
  if (/^<svg[\s>/]/i.test(rest)) return 'image/svg+xml';
  return undefined;
}

async function sideOf(repo: HostRepo, oid: string, mode: string | undefined, size: number, cap: number): Promise<ImageSide> {
  if (oid === ZERO_OID) return { state: 'absent' };
  // A symlink's blob is its target, not a picture.
  if (mode === '120000') return { state: 'not-an-image', bytes: size };
  // The listing's size first, so an oversized blob is not even read; then the bytes themselves.
  if (size > cap) return { state: 'too-large', bytes: size };
  const buf = (await repo.readBlobs([oid])).get(oid);
  if (!buf) throw new AirlockError('INTERNAL', `The run's object store has no object ${oid}; the result is damaged.`);
  if (buf.length > cap) return { state: 'too-large', bytes: buf.length };
  const mime = sniffImage(buf);
  return mime ? { state: 'image', mime, bytes: buf.length, base64: buf.toString('base64') } : { state: 'not-an-image', bytes: buf.length };
}

/**
 * A changed file's two sides as pictures, from the host's own object store (the result derived at
 * collect, docs/architecture.md §11), each side up to `cap` bytes.
 */
export async function imagesOf(repo: HostRepo, result: Pick<StoredResult, 'changes'>, path: string, cap: number): Promise<FileImages> {
  const change = result.changes.find((c) => c.path === path);
  if (!change) throw new AirlockError('NOT_FOUND', `${path} is not among the run's changed files.`);
  const [before, after] = await Promise.all([sideOf(repo, change.oldOid, change.oldMode, change.oldSize, cap), sideOf(repo, change.newOid, change.newMode, change.size, cap)]);
  return { path, before, after, capBytes: cap };
}
