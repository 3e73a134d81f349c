import { InvalidDurationError } from '../model/errors/invalid-duration.error.js';
import { isDuration } from '../model/validate.js';

/**
 * Why `ms` cannot be passed to `ctx.extendLockTime`, or undefined when it can: the one rule for a lease extension,
 * shared by the real lease and `createTestJobContext`, so a handler's unit test fails where production would.
 */
export function lockExtensionError(ms: unknown): InvalidDurationError | undefined {
  return isDuration(ms) ? undefined : new InvalidDurationError('extendLockTime(ms)', ms);
}
