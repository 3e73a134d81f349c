import { JobsError } from './jobs.error.js';

/** `retry()` found the job changed between its read and its write, again and again; nothing changed. Retry again. */
export class RetryContendedError extends JobsError {
  constructor(
    readonly jobId: string,
    readonly tries: number,
  ) {
    super(
      `Could not retry job ${jobId}: in ${tries} tries it changed between retry's read and its write (another ` +
        'process is cancelling or retrying it, or its key changes hands). Nothing changed; retry again.',
    );
  }
}
