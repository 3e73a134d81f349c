import { describeValue } from './describe-value.js';
import { JobsError } from './jobs.error.js';

/** An option (module, handler or enqueue option) with a value outside its rule. */
export class InvalidOptionError extends JobsError {
  constructor(
    readonly option: string,
    readonly value: unknown,
    readonly rule: string,
  ) {
    super(`Invalid option ${option}: ${rule}, got ${describeValue(value)}`);
  }
}
