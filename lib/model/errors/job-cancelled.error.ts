import { JobsError } from './jobs.error.js';

/**
 * `JobsService.cancel()` was called for a running job: its signal is aborted with this (at once in the cancelling
 * process, at its next lease renewal in another), and its `extendLockTime`/`updateProgress` reject with it.
 */
export class JobCancelledError extends JobsError {
  constructor(readonly jobId: string) {
    super(`Job ${jobId} was cancelled`);
  }
}
