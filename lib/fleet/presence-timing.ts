/**
 * Shortest presence refresh interval: a worker polling every few ms still writes its presence at most 4 times a
 * second.
 */
const MIN_REFRESH_MS = 250;
/** A worker that missed this many refreshes is gone from the fleet view. */
export const MISSED_REFRESHES_GONE = 3;
/** A presence document this many refreshes old is deleted by whichever worker cleans up next. */
export const MISSED_REFRESHES_DELETED = 10;
/** A worker cleans up stale presence documents on every this-many-th refresh (its first included). */
export const CLEANUP_EVERY_REFRESHES = 10;
/** Stale presence documents one cleanup deletes at most. */
export const CLEANUP_BATCH_SIZE = 100;

/**
 * How often a worker refreshes its presence: every poll interval (floored), so a dead process drops out of the
 * fleet view within the window its health check uses (3 × pollIntervalMs).
 */
export function presenceRefreshMs(pollIntervalMs: number): number {
  return Math.max(pollIntervalMs, MIN_REFRESH_MS);
}
