import { JobsError } from './jobs.error.js';

/**
 * The `session` given to `enqueue`/`enqueueMany` cannot carry the enqueue: not a MongoDB `ClientSession`, started on
 * another MongoClient than the jobs connection's, or already ended. Nothing was written.
 */
export class InvalidSessionError extends JobsError {
  constructor(
    /** Why the session was refused. */
    readonly reason: string,
  ) {
    super(`Invalid enqueue session: ${reason}. Nothing was stored.`);
  }
}
