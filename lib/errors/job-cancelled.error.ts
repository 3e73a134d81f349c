import { JobsError } from './jobs.error';

/** `JobsService.cancel()` was called for a job running in this process; its signal is aborted with this. */
export class JobCancelledError extends JobsError {
  constructor(readonly jobId: string) {
    super(`Job ${jobId} was cancelled`);
  }
}
