import { create } from 'zustand';
import { createJSONStorage, persist } from 'zustand/middleware';
import { anchorKey, type ReviewComment } from '../lib/review-comments';
import { sessionStore } from './session-storage';

interface ReviewCommentsState {
  /** Comments being written on a run's change, by run id. */
  drafts: Record<string, ReviewComment[]>;
  /** Comments sent as a follow-up, by the follow-up's run id (its Review shows what they asked). */
  sent: Record<string, { from: string; comments: ReviewComment[] }>;
  /** Adds a comment, or replaces the one at the same place. */
  put(runId: string, comment: ReviewComment): void;
  remove(runId: string, id: string): void;
  /** The run's comments went out as `followUpId`'s task. */
  markSent(runId: string, followUpId: string): void;
}

/**
 * Review comments (docs/architecture.md §11, "Comments to the agent"): kept for the window's session like
 * the New run draft, so a reload or a look at another screen loses none. Nothing here is a secret.
 */
export const useReviewComments = create<ReviewCommentsState>()(
  persist(
    (set) => ({
      drafts: {},
      sent: {},
      put: (runId, comment) => set((s) => {
        const key = anchorKey(comment.path, comment.anchor);
        const rest = (s.drafts[runId] ?? []).filter((c) => anchorKey(c.path, c.anchor) !== key);
        return { drafts: { ...s.drafts, [runId]: [...rest, comment] } };
      }),
      remove: (runId, id) => set((s) => ({ drafts: { ...s.drafts, [runId]: (s.drafts[runId] ?? []).filter((c) => c.id !== id) } })),
      markSent: (runId, followUpId) => set((s) => {
        const { [runId]: comments = [], ...drafts } = s.drafts;
        return { drafts, sent: { ...s.sent, [followUpId]: { from: runId, comments } } };
      }),
    }),
    { name: 'airlock.review-comments', storage: createJSONStorage(sessionStore) },
  ),
);
