import { useState } from 'react';
import { IMAGE_PATH, type ChangeScope, type ImageSide } from '../../../contracts';
import { useRemote } from '../hooks/use-remote';
import { useDiffStore } from '../stores/diff-store';
import { formatBytes } from '../lib/format';

/** Whether review shows this changed file as pictures too (the host decides from the bytes what each side is). */
export const isImagePath = (path: string): boolean => IMAGE_PATH.test(path);

/**
 * One side of a picture. Drawn only through `<img>` with a data URL of the host's bytes and the
 * host's sniffed type: an SVG is then an image document, which runs no script and fetches nothing,
 * and never becomes markup in this page (CSP `img-src 'self' data:`, docs/architecture.md §11).
 */
function Side({ label, side, cap }: { label: string; side: ImageSide; cap: number }) {
  let body;
  switch (side.state) {
    case 'image':
      body = <img className="image-side" alt={`${label}: ${side.mime}, ${formatBytes(side.bytes)}`} src={`data:${side.mime};base64,${side.base64}`} />;
      break;
    case 'too-large':
      body = <div className="empty">Too large to show here ({formatBytes(side.bytes)}; pictures up to {formatBytes(cap)} are drawn). Export the patch or open the file after applying.</div>;
      break;
    case 'not-an-image':
      body = <div className="empty">Not a PNG, JPEG, GIF, WebP or SVG picture ({formatBytes(side.bytes)}), whatever its name says.</div>;
      break;
    case 'absent':
      body = <div className="empty">{label === 'Before' ? 'Not there before (added by the run).' : 'Deleted by the run.'}</div>;
      break;
  }
  return (
    <figure className="image-figure" aria-label={label}>
      <figcaption className="muted">{label}{side.state === 'image' ? ` · ${side.mime.replace('image/', '').replace('+xml', '')} · ${formatBytes(side.bytes)}` : ''}</figcaption>
      {body}
    </figure>
  );
}

/** A changed picture before and after, side by side or one over the other. */
export function ImageDiff({ runId, path, scope, checkpoint }: { runId: string; path: string; scope?: ChangeScope; checkpoint?: number }) {
  const load = useDiffStore((s) => s.images);
  const { value: images, error } = useRemote(() => load({ runId, path, ...(scope ? { scope } : {}), ...(checkpoint !== undefined ? { checkpoint } : {}) }), [runId, path, scope, checkpoint], { reset: true });
  const [layout, setLayout] = useState<'side' | 'stacked'>('side');
  if (error) return <div className="empty" role="note">{error.message}</div>;
  if (!images) return <div className="empty">Loading the pictures…</div>;
  return (
    <section className="stack" aria-label="Pictures">
      <div className="row" role="radiogroup" aria-label="Picture layout">
        <button className="btn small" aria-pressed={layout === 'side'} onClick={() => setLayout('side')}>Side by side</button>
        <button className="btn small" aria-pressed={layout === 'stacked'} onClick={() => setLayout('stacked')}>One over the other</button>
      </div>
      <div className={`image-pair ${layout}`}>
        <Side label="Before" side={images.before} cap={images.capBytes} />
        <Side label="After" side={images.after} cap={images.capBytes} />
      </div>
    </section>
  );
}
