import { InvalidOptionError } from '../model/errors/invalid-option.error.js';
import { FINISHED_STATUSES, type FinishedStatus } from '../model/job-record.js';
import { MAX_JOB_NAME_LENGTH } from '../model/jobs.constants.js';
import { integerInRange, nonEmptyString } from '../model/validate.js';
import type { PurgeFilter } from '../persistence/job-admin.store.js';

/** What `JobsService.purge` deletes. */
export interface PurgeOptions {
  /** A final status; `pending` and `running` are refused. */
  status: FinishedStatus;
  /** Only jobs of this name. @default every name */
  name?: string;
  /** Only jobs finished strictly before this instant. @default whenever they finished */
  finishedBefore?: Date;
  /**
   * Delete at most this many, an integer from 1 to 1,000 (`MAX_PURGE_LIMIT`); the rest stays for another call.
   * @default all that match
   */
  limit?: number;
}

/** Most jobs one bounded `purge` call (`limit`) deletes: what the dashboard's purge route deletes per request. */
export const MAX_PURGE_LIMIT = 1_000;

const PURGE_OPTION_KEYS: readonly string[] = ['status', 'name', 'finishedBefore', 'limit'];

/** `purge`'s `limit`, checked: an integer from 1 to MAX_PURGE_LIMIT, or no limit. */
export function purgeLimit(options: PurgeOptions): number {
  return options.limit === undefined
    ? Number.POSITIVE_INFINITY
    : integerInRange('limit', options.limit, 1, MAX_PURGE_LIMIT);
}

/** Checks `purge`'s options before anything is deleted. */
export function resolvePurgeFilter(options: PurgeOptions): PurgeFilter {
  if (options === null || typeof options !== 'object') {
    throw new InvalidOptionError('options', options, 'must be an object');
  }
  // A misspelt key (`before`, `names`) would otherwise be ignored, and purge far more than was asked.
  const unknown = Object.keys(options).find((key) => !PURGE_OPTION_KEYS.includes(key));
  if (unknown !== undefined) {
    const given = (options as unknown as Record<string, unknown>)[unknown];
    throw new InvalidOptionError(unknown, given, `is not a purge option (${PURGE_OPTION_KEYS.join(', ')})`);
  }
  const { status, name, finishedBefore } = options;
  if (!FINISHED_STATUSES.includes(status)) {
    throw new InvalidOptionError(
      'status',
      status,
      `must be one of ${FINISHED_STATUSES.join(', ')} (pending and running jobs are never purged; cancel them first)`,
    );
  }
  if (finishedBefore !== undefined && (!(finishedBefore instanceof Date) || Number.isNaN(finishedBefore.getTime()))) {
    throw new InvalidOptionError('finishedBefore', finishedBefore, 'must be a valid Date');
  }
  return {
    status,
    ...(name !== undefined && { name: nonEmptyString('name', name, MAX_JOB_NAME_LENGTH) }),
    ...(finishedBefore !== undefined && { finishedBefore }),
  };
}
