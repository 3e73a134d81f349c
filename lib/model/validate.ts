import { InvalidOptionError } from './errors/invalid-option.error.js';
import { MAX_DURATION_MS } from './jobs.constants.js';

/** Shared option rules; each throws InvalidOptionError naming the option. */

export function positiveInteger(option: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value <= 0) {
    throw new InvalidOptionError(option, value, 'must be an integer greater than 0');
  }
  return value;
}

export function integerInRange(option: string, value: unknown, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new InvalidOptionError(option, value, `must be an integer from ${min} to ${max}`);
  }
  return value;
}

/**
 * Refuses an own key outside `known` (`what` names the options in the message): a misspelt key would otherwise be
 * ignored, and the call do something else than was asked. `Object.keys`, so a `__proto__` key from JSON counts too.
 */
export function onlyKnownKeys(options: object, known: readonly string[], what: string): void {
  const unknown = Object.keys(options).find((key) => !known.includes(key));
  if (unknown !== undefined) {
    const given = (options as Record<string, unknown>)[unknown];
    throw new InvalidOptionError(unknown, given, `is not ${what} (${known.join(', ')})`);
  }
}

export function finiteNumber(option: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw new InvalidOptionError(option, value, 'must be a finite number');
  }
  return value;
}

export function nonEmptyString(option: string, value: unknown, maxLength = 200): string {
  if (typeof value !== 'string' || value.trim() === '' || value.length > maxLength) {
    throw new InvalidOptionError(option, value, `must be a non-empty string of at most ${maxLength} characters`);
  }
  return value;
}

/**
 * A duration in ms above 0 (or at least 0 with `allowZero`) and at most `max`: MAX_DURATION_MS (~31 years) keeps
 * every deadline a valid Date; MAX_TIMER_MS is for values handed to setTimeout, which fires at once past it.
 * The one duration rule: options (`duration`) and `extendLockTime` (InvalidDurationError) both check it here.
 */
export function isDuration(value: unknown, max = MAX_DURATION_MS, allowZero = false): value is number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 && (value > 0 || allowZero) && value <= max;
}

/** `isDuration`, or an InvalidOptionError naming the option. */
export function duration(option: string, value: unknown, max = MAX_DURATION_MS, allowZero = false): number {
  if (!isDuration(value, max, allowZero)) {
    const low = allowZero ? 'at least 0' : 'above 0';
    throw new InvalidOptionError(option, value, `must be a number of milliseconds ${low} and at most ${max}`);
  }
  return value;
}
