import { JobsError } from './jobs.error.js';

/** The handler ran longer than its `timeoutMs`; the signal is aborted with this and the attempt fails. */
export class JobTimeoutError extends JobsError {
  constructor(
    readonly jobId: string,
    readonly timeoutMs: number,
  ) {
    super(`Job ${jobId} exceeded its timeout of ${timeoutMs} ms`);
  }
}
