import { describeValue } from './describe-value.js';
import { JobsError } from './jobs.error.js';

/** A `list` cursor that `list` did not hand out (altered, truncated, or from elsewhere); it never reaches a query. */
export class InvalidCursorError extends JobsError {
  constructor(
    readonly value: unknown,
    readonly reason: string,
  ) {
    super(`Invalid list cursor ${describeValue(value)}: ${reason}; pass back a nextCursor that list returned`);
  }
}
