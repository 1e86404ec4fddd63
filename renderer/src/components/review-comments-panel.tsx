import { useState } from 'react';
import { useAction } from '../hooks/use-action';
import { anchorKey, anchorLabel, MAX_COMMENT_CHARS, revisionTask, type CommentAnchor, type ReviewComment } from '../lib/review-comments';
import { useAppStore } from '../stores/app-store';
import { useReviewComments } from '../stores/review-comments-store';
import { useRunsStore } from '../stores/runs-store';

const NO_COMMENTS: ReviewComment[] = [];

/** The comments being written on a run's change. */
export function useDraftComments(runId: string): ReviewComment[] {
  return useReviewComments((s) => s.drafts[runId] ?? NO_COMMENTS);
}

/**
 * Writing one comment at a line or hunk; for a hunk, rejecting it (left out of apply, and the agent is
 * asked to undo it). Saving a second comment at the same place replaces the first.
 */
export function CommentEditor({ runId, path, anchor, onClose }: { runId: string; path: string; anchor: CommentAnchor; onClose(): void }) {
  const existing = useDraftComments(runId).find((c) => anchorKey(c.path, c.anchor) === anchorKey(path, anchor));
  const [body, setBody] = useState(existing?.body ?? '');
  const [rejected, setRejected] = useState(existing?.rejected ?? false);
  const save = () => {
    useReviewComments.getState().put(runId, { id: existing?.id ?? crypto.randomUUID(), path, anchor, body: body.trim(), rejected });
    onClose();
  };
  return (
    <div className="banner info stack" role="group" aria-label="Comment for the agent">
      <div><b>{path}</b>, {anchorLabel(anchor)}{anchor.kind === 'line' && <> <code>{anchor.text.slice(0, 120)}</code></>}</div>
      <textarea aria-label="Comment" rows={3} maxLength={MAX_COMMENT_CHARS} value={body} autoFocus placeholder="What should the agent change here?" onChange={(e) => setBody(e.target.value)} />
      {anchor.kind === 'hunk' && (
        <label className="row check-label">
          <input type="checkbox" checked={rejected} onChange={(e) => setRejected(e.target.checked)} /> Reject this hunk: leave it out of apply and ask the agent to undo it
        </label>
      )}
      <div className="row">
        <button type="button" className="btn primary small" disabled={!body.trim() && !rejected} onClick={save}>Save comment</button>
        <button type="button" className="btn small" onClick={onClose}>Cancel</button>
        {existing && <button type="button" className="btn small danger" onClick={() => { useReviewComments.getState().remove(runId, existing.id); onClose(); }}>Remove comment</button>}
      </div>
    </div>
  );
}

/**
 * The comments on this change and "Ask the agent to revise": a follow-up turn (§15) whose task quotes
 * each comment at its file and line; its own change is then what changed since the comments.
 */
export function ReviewCommentsPanel({ runId, canSend }: { runId: string; canSend: boolean }) {
  const comments = useDraftComments(runId);
  const navigate = useAppStore((s) => s.navigate);
  const { busy, error, run } = useAction();
  if (!comments.length) return null;
  const send = () => run(async () => {
    const next = await useRunsStore.getState().continueRun({ runId, task: revisionTask(comments) });
    useReviewComments.getState().markSent(runId, next.id);
    navigate({ name: 'run', runId: next.id });
  });
  return (
    <section className="panel stack review-comments" aria-label="Comments for the agent">
      <h2 style={{ margin: 0 }}>Comments for the agent ({comments.length})</h2>
      <ul>
        {comments.map((c) => (
          <li key={c.id} data-comment={anchorKey(c.path, c.anchor)}>
            <span className="mono">{c.path}</span>, {anchorLabel(c.anchor)}{c.rejected && <span className="risk-reason"> · rejected</span>}: {c.body || <span className="muted">(no words)</span>}{' '}
            <button type="button" className="btn small" aria-label={`remove the comment on ${c.path}, ${anchorLabel(c.anchor)}`} onClick={() => useReviewComments.getState().remove(runId, c.id)}>Remove</button>
          </li>
        ))}
      </ul>
      <div className="row">
        <button type="button" className="btn primary" disabled={busy || !canSend} onClick={() => void send()}>Ask the agent to revise</button>
        <span className="muted">{canSend ? 'A follow-up starts from this result with your comments; nothing is applied first.' : 'Comments go out once the run has ended.'}</span>
        {error && <span className="del-n" role="alert">{error}</span>}
      </div>
    </section>
  );
}

/** On a follow-up made from comments: what they asked, above "This turn's change" (what changed since). */
export function SentCommentsNote({ runId }: { runId: string }) {
  const sent = useReviewComments((s) => s.sent[runId]);
  const navigate = useAppStore((s) => s.navigate);
  if (!sent) return null;
  return (
    <div className="banner info" role="note" aria-label="Your comments">
      This turn answers your comments on <button type="button" className="btn small" onClick={() => navigate({ name: 'review', runId: sent.from })}>{sent.from}</button>; &quot;This turn&apos;s change&quot; is what changed since.
      <ul>{sent.comments.map((c) => <li key={c.id}><span className="mono">{c.path}</span>, {anchorLabel(c.anchor)}{c.rejected ? ' (rejected)' : ''}: {c.body}</li>)}</ul>
    </div>
  );
}
