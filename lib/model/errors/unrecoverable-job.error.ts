import { JobsError } from './jobs.error.js';
import { hasBrand, packageBrand, setBrand } from './package-brand.js';

/** Throw from a handler to dead-letter the job at once, without further retries. */
export class UnrecoverableJobError extends JobsError {}

// The worker may be the other build's (a CommonJS dependency's handler throws this copy's class): it reads the brand.
const UNRECOVERABLE = packageBrand('UnrecoverableJobError');
setBrand(UnrecoverableJobError.prototype, UNRECOVERABLE);

/** Whether `error` is an `UnrecoverableJobError` (a subclass included) of either build of this package. */
export function isUnrecoverable(error: unknown): boolean {
  return error instanceof UnrecoverableJobError || hasBrand(error, UNRECOVERABLE);
}
