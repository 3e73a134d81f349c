/**
 * What became of a job's row once this worker was done with it, as far as this worker knows: what the shutdown
 * summary counts.
 */
export type RowFate =
  /** Its end is on the row: completed, retrying, dead or failed by this worker's write, or cancelled by someone else. */
  | 'finished'
  /** Handed back to `pending` with no attempt counted (a handler that stopped on the shutdown abort, a late claim). */
  | 'released'
  /**
   * Nothing of this worker's landed (the write failed, was abandoned at the deadline or is still in doubt, or the
   * handler is still running): the row stays `running` until its lease runs out, then another worker reclaims it.
   */
  | 'left'
  /** No longer this worker's when its write was sent: its lease was lost and the row taken over, or cancelled. */
  | 'not_ours';
