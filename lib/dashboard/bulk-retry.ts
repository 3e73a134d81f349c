import { jobErrorStatus } from '../http/job-error-status.js';
import type { JobsService } from '../jobs.service.js';
import { InvalidOptionError } from '../model/errors/invalid-option.error.js';
import { MAX_JOB_NAME_LENGTH } from '../model/jobs.constants.js';
import { nonEmptyString } from '../model/validate.js';
import { MAX_LIST_LIMIT } from '../persistence/list-jobs-options.js';

/** Most jobs one bulk retry call looks at: it stays a bounded request; `more` says whether to call again. */
export const MAX_BULK_RETRY = 1_000;
/** A list cursor is far shorter; a longer string is refused before it is parsed. */
const MAX_CURSOR_LENGTH = 1_000;

/** What `POST jobs/retry` answers. */
export interface BulkRetryResult {
  /** Jobs revived to `pending`. */
  retried: number;
  /** Jobs left as they were: another job holds their dedupe key, they changed meanwhile, or their id is not an ObjectId. */
  skipped: number;
  /** More jobs of this name and status may be left: the call stopped at its bound. */
  more: boolean;
  /**
   * Where the next call goes on (pass it as `cursor`), when `more`: older jobs than this call looked at, so a walk of
   * several calls visits each job once, even when jobs it revived die again meanwhile or the newest are skipped.
   */
  nextCursor: string | null;
}

const BULK_RETRY_KEYS: readonly string[] = ['name', 'status', 'cursor'];

/**
 * Retries the `dead` (or `failed`) jobs of one name, newest first (from `cursor`, the `nextCursor` of the call
 * before, when given), at most `MAX_BULK_RETRY` per call. Each goes
 * through `JobsService.retry`, so each is owner-safe and keeps its dedupe key rule; a job retry refuses is skipped.
 */
export async function bulkRetry(jobs: JobsService, body: Record<string, unknown>): Promise<BulkRetryResult> {
  const unknown = Object.keys(body).find((key) => !BULK_RETRY_KEYS.includes(key));
  if (unknown !== undefined) {
    throw new InvalidOptionError(unknown, body[unknown], `is not a bulk retry option (${BULK_RETRY_KEYS.join(', ')})`);
  }
  const name = nonEmptyString('name', body.name, MAX_JOB_NAME_LENGTH);
  const { status } = body;
  if (status !== 'dead' && status !== 'failed')
    throw new InvalidOptionError('status', status, 'must be dead or failed');
  const result: BulkRetryResult = { retried: 0, skipped: 0, more: false, nextCursor: null };
  let cursor = body.cursor === undefined ? undefined : nonEmptyString('cursor', body.cursor, MAX_CURSOR_LENGTH);
  for (let seen = 0; seen < MAX_BULK_RETRY; ) {
    const limit = Math.min(MAX_LIST_LIMIT, MAX_BULK_RETRY - seen);
    // Paging by id: rows this call revives leave the filter without shifting the pages after them.
    const page = await jobs.list({ name, status, limit, ...(cursor !== undefined && { cursor }) });
    for (const job of page.jobs) {
      seen += 1;
      try {
        const after = await jobs.retry(job.id);
        if (after?.status === 'pending') result.retried += 1;
        else result.skipped += 1;
      } catch (error) {
        // A refusal about this one job (its key is held, it kept changing, its id is foreign); anything else is ours.
        if (jobErrorStatus(error) === undefined) throw error;
        result.skipped += 1;
      }
    }
    if (page.nextCursor === null) return result;
    cursor = page.nextCursor;
  }
  result.more = true;
  result.nextCursor = cursor ?? null;
  return result;
}
