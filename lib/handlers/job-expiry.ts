import { CRON_TICK_KEEP_MS } from '../model/catch-up-window.js';
import { addMs } from '../model/clock.js';
import type { JobDocument } from '../model/job-document.js';

/** The row fields an expiry depends on. */
export type ExpiringRow = Pick<JobDocument, 'scheduleKey' | 'runAt'>;

/**
 * When a job finished at `finishedAt` may be deleted, given its status's retention (`null`: never, no stamp). A cron
 * tick's row is kept until `CRON_TICK_KEEP_MS` past its tick at least; its `runAt` is never before its tick (only
 * backoff, release and retry move it, always forward), so it stands for the tick here.
 */
export function expiryOf(retentionMs: number | null, finishedAt: Date, row: Partial<ExpiringRow>): Date | undefined {
  if (retentionMs === null) return undefined;
  const expiry = addMs(finishedAt, retentionMs);
  if (row.scheduleKey === undefined || !(row.runAt instanceof Date)) return expiry;
  return new Date(Math.max(expiry.getTime(), row.runAt.getTime() + CRON_TICK_KEEP_MS));
}
