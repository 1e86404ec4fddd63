import { externalLinkUrl } from '../../../contracts/external-links';

/**
 * Opens a link printed in a terminal the way preview links open: a new browsing context, without
 * opener or referrer. In the desktop app main's window-open handler applies the same rule again and
 * hands the URL to the user's browser (docs/architecture.md §2.7). Returns whether it was allowed.
 */
export function openExternalLink(raw: string, open: (url: string) => unknown = (url) => window.open(url, '_blank', 'noopener,noreferrer')): boolean {
  const url = externalLinkUrl(raw);
  if (!url) return false;
  open(url);
  return true;
}
