import type { JobDocument } from './job-document.js';

/**
 * A row as a claim reads it back: all but its attempt history, which no run reads and which reaches about 330 KB on a
 * job that failed often (50 attempts with stacks): a claim would decode it all again at every retry. The run's writes
 * append to it on the server (`$push`), unread. `logs` (at most about 120 KB) stays: the claim checks that it is an
 * array (`whyNotRunnable`), and a projection cannot both drop it and say what it was.
 */
export type ClaimedRow = Omit<JobDocument, 'attempts'>;

/** The projection of every read that returns a `ClaimedRow` (claims, claim read-backs). */
export const CLAIMED_ROW_PROJECTION = { attempts: 0 } as const;

/** A row this process now owns (`lockedBy === lockId`, status `running`). */
export interface ClaimedJob {
  doc: ClaimedRow;
  lockId: string;
}
