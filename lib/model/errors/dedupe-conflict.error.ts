import { JobsError } from './jobs.error.js';

/** `retry()` of a job whose dedupe key another pending or running job of the same name holds; nothing changed. */
export class DedupeConflictError extends JobsError {
  constructor(
    readonly jobId: string,
    readonly jobName: string,
    readonly dedupeKey: string,
    /** Id of the live job that holds the key. */
    readonly holderId: string,
  ) {
    super(
      `Job ${jobId} (${jobName}) cannot be retried: job ${holderId} holds its dedupeKey "${dedupeKey}" while ` +
        'pending or running. Wait for or cancel that job, then retry.',
    );
  }
}
