import { describeValue } from '../utils/describe-value';
import { JobsError } from './jobs.error';

/** A duration (e.g. for `ctx.extendLockTime`) that is not a finite number of milliseconds above 0. */
export class InvalidDurationError extends JobsError {
  constructor(
    readonly argument: string,
    readonly value: unknown,
  ) {
    super(`${argument} must be a finite number of milliseconds greater than 0, got ${describeValue(value)}`);
  }
}
