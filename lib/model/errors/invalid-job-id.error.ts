import { describeValue } from './describe-value.js';
import { JobsError } from './jobs.error.js';

/** An id that is not a 24-character hex ObjectId string; it never reaches a query. */
export class InvalidJobIdError extends JobsError {
  constructor(readonly value: unknown) {
    super(`Invalid job id ${describeValue(value)}: expected a 24-character hex string`);
  }
}
