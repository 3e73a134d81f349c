import { describeValue } from './describe-value.js';
import { JobsError } from './jobs.error.js';

/** `enqueue` named a job that no `@JobHandler` in this process handles (pass `{ strict: false }` to allow it). */
export class UnknownJobError extends JobsError {
  constructor(
    readonly jobName: string,
    readonly knownNames: readonly string[],
  ) {
    super(
      `No @JobHandler is registered for job ${describeValue(jobName)} in this process ` +
        `(known: ${knownNames.slice(0, 20).join(', ') || 'none'}). ` +
        'Pass { strict: false } to enqueue it for a handler that lives in another process.',
    );
  }
}
