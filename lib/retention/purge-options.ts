import { InvalidOptionError } from '../errors/invalid-option.error';
import { MAX_JOB_NAME_LENGTH } from '../jobs.constants';
import { FINISHED_STATUSES, type FinishedStatus } from '../persistence/job.types';
import type { PurgeFilter } from '../persistence/jobs.repository';
import { nonEmptyString } from '../utils/validate';

/** What `JobsService.purge` deletes. */
export interface PurgeOptions {
  /** A final status; `pending` and `running` are refused. */
  status: FinishedStatus;
  /** Only jobs of this name. @default every name */
  name?: string;
  /** Only jobs finished strictly before this instant. @default whenever they finished */
  finishedBefore?: Date;
}

/** Checks `purge`'s options before anything is deleted. */
export function resolvePurgeFilter(options: PurgeOptions): PurgeFilter {
  if (options === null || typeof options !== 'object') {
    throw new InvalidOptionError('options', options, 'must be an object');
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
