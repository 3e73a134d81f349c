import { UnrecoverableJobError } from './unrecoverable-job.error.js';

/**
 * A handler resolved a value MongoDB cannot store as the job's `result` (same rules as payloads, and the job document
 * with it must stay under 16 MB). Unrecoverable: running the handler again would return the same kind of value, so
 * the job is dead-lettered at once, with no result written.
 */
export class UnstorableResultError extends UnrecoverableJobError {
  constructor(
    readonly jobId: string,
    /** Where in the result the problem is (`''` for the result as a whole). */
    readonly path: string,
    readonly problem: string,
  ) {
    super(
      `Job ${jobId} returned a result that cannot be stored: ${path === '' ? 'the result' : `result.${path}`} ${problem}`,
    );
  }
}
