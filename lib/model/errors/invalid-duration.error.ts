import { describeValue } from './describe-value.js';
import { JobsError } from './jobs.error.js';

/** A duration (e.g. for `ctx.extendLockTime`) that is not a number of milliseconds in (0, 1e12]. */
export class InvalidDurationError extends JobsError {
  constructor(
    readonly argument: string,
    readonly value: unknown,
  ) {
    super(`${argument} must be a number of milliseconds above 0 and at most 1e12, got ${describeValue(value)}`);
  }
}
