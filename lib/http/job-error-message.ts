import type { JobsError } from '../errors/jobs.error';
import { UniqueIndexRejectedJobError } from '../errors/unique-index-rejected-job.error';
import { UnknownJobError } from '../errors/unknown-job.error';
import { describeValue } from '../utils/describe-value';

/**
 * The message an HTTP caller gets for a library error it caused. Most messages are about the request and go as they
 * are; the few written for the application's developers (which index on which collection refused a job, which job
 * names this process handles) are replaced: a client of the API must not learn the database's or the app's layout.
 * The error itself (a 4xx is not logged) keeps the details for the application's own filters and logs.
 */
export function jobErrorMessage(error: JobsError): string {
  if (error instanceof UniqueIndexRejectedJobError) {
    return `Job ${describeValue(error.jobName)} cannot be stored: a stored job already has the same unique value.`;
  }
  if (error instanceof UnknownJobError) return `No job handler is registered for job ${describeValue(error.jobName)}.`;
  return error.message;
}
