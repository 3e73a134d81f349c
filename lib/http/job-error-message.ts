import { describeValue } from '../model/errors/describe-value.js';
import { DrainTimeoutError } from '../model/errors/drain-timeout.error.js';
import type { JobsError } from '../model/errors/jobs.error.js';
import { UniqueIndexRejectedJobError } from '../model/errors/unique-index-rejected-job.error.js';
import { UnknownJobError } from '../model/errors/unknown-job.error.js';

/**
 * The message an HTTP caller gets for a library error it caused. Most messages are about the request and go as they
 * are; the few written for the application's developers (which index on which collection refused a job, which job
 * names this process handles, which jobs of which names a drain was still waiting for) are replaced: a client of
 * the API must not learn the database's or the app's layout. The error itself (a 4xx is not logged) keeps the
 * details for the application's own filters and logs.
 */
export function jobErrorMessage(error: JobsError): string {
  if (error instanceof UniqueIndexRejectedJobError) {
    return `Job ${describeValue(error.jobName)} cannot be stored: a stored job already has the same unique value.`;
  }
  if (error instanceof UnknownJobError) return `No job handler is registered for job ${describeValue(error.jobName)}.`;
  // Its list names jobs (tenants, customers) and ids the caller never gave; `left` keeps them for the app's logs.
  if (error instanceof DrainTimeoutError) {
    return error.left.length === 0
      ? `Could not confirm within ${error.timeoutMs} ms that no job was left (drain).`
      : `Jobs were still left after ${error.timeoutMs} ms (drain); they may still finish later.`;
  }
  return error.message;
}
