import { externalLinkUrl, type LinkablePreview } from '../../../contracts/external-links';

/**
 * Opens a link printed in a terminal the way preview links open: a new browsing context, without
 * opener or referrer. Loopback http links open only for the run's published preview ports
 * (`previews`), on their own site (contracts/external-links.ts); in the desktop app main's
 * window-open handler applies the same rule again, against every live run's published ports, and
 * hands the URL to the user's browser (docs/architecture.md §2.7). Returns whether it was allowed.
 */
export function openExternalLink(raw: string, previews: readonly LinkablePreview[] = [], open: (url: string) => unknown = (url) => window.open(url, '_blank', 'noopener,noreferrer')): boolean {
  const url = externalLinkUrl(raw, previews);
  if (!url) return false;
  open(url);
  return true;
}

/** Whether a link needs the run's published ports to be judged (a loopback http link). */
export function needsPreviewPorts(raw: string): boolean {
  return /^\s*http:\/\/(127\.0\.0\.1|localhost|\[::1\])(:|\/|$)/i.test(raw);
}
