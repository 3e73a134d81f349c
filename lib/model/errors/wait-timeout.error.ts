import { JobsError } from './jobs.error.js';

/**
 * `JobsService.waitUntilFinished` gave up: the job was not completed, dead, failed or cancelled within `timeoutMs`.
 * The job itself is untouched and may still finish (unlike `JobTimeoutError`, which means a handler ran too long).
 * `JobsService.drain` rejects with its subclass `DrainTimeoutError`, which lists what was left.
 */
export class WaitTimeoutError extends JobsError {
  constructor(
    readonly jobId: string,
    readonly timeoutMs: number,
    options?: { cause?: unknown },
  ) {
    super(`Job ${jobId} did not finish within ${timeoutMs} ms (waitUntilFinished); it may still finish later`, options);
  }
}
