import type { Readable } from 'node:stream';
import { parseRefUpdates, pushOutsidePrefix } from './rules';

/** Largest ref-update section of a push read before forwarding (many refs are a few KiB). */
const MAX_PUSH_COMMANDS = 256 * 1024;

type RefUpdates = NonNullable<ReturnType<typeof parseRefUpdates>>;

/** What the start of a push said. */
export type PushCheck =
  /** Every ref is under the prefix: forward `head` (the bytes read so far), then the rest of the body. */
  | { kind: 'forward'; head: Buffer }
  /** A ref is outside the prefix: answer in git's own format; nothing may go upstream. */
  | { kind: 'outside'; outside: string; parsed: RefUpdates }
  /** The ref updates could not be read (malformed, too many, or the body ended first). */
  | { kind: 'unreadable'; reason: string };

/**
 * A push allowed only under a branch prefix (`git-push=PREFIX`, docs/architecture.md §2.8): reads the
 * receive-pack ref updates from the request body before any byte goes upstream, and says once what
 * they are. The body is left paused after it answers (the caller pipes or drains it).
 */
export function checkPush(body: Readable, prefix: string, answer: (check: PushCheck) => void): void {
  const chunks: Buffer[] = [];
  let size = 0;
  let settled = false;
  const settle = (check: PushCheck) => {
    settled = true;
    body.off('data', onData);
    body.off('end', onEnd);
    body.pause();
    answer(check);
  };
  const onData = (c: Buffer) => {
    chunks.push(c);
    size += c.length;
    const buf = chunks.length === 1 ? c : Buffer.concat(chunks);
    let parsed: ReturnType<typeof parseRefUpdates>;
    try {
      parsed = parseRefUpdates(buf);
    } catch (err) {
      settle({ kind: 'unreadable', reason: `the push could not be read (${(err as Error).message})` });
      return;
    }
    if (!parsed) {
      if (size > MAX_PUSH_COMMANDS) settle({ kind: 'unreadable', reason: 'the push names more refs than the gateway reads' });
      return;
    }
    const outside = pushOutsidePrefix(parsed.updates, prefix);
    settle(outside ? { kind: 'outside', outside, parsed } : { kind: 'forward', head: buf });
  };
  const onEnd = () => {
    if (!settled) settle({ kind: 'unreadable', reason: 'the push ended before its ref updates' });
  };
  body.on('data', onData);
  body.once('end', onEnd);
}
