import { addMs } from '../model/clock.js';
import { InvalidOptionError } from '../model/errors/invalid-option.error.js';
import type { JobDocument } from '../model/job-document.js';
import { MAX_DURATION_MS } from '../model/jobs.constants.js';
import type { EnqueueOptions } from '../model/jobs.types.js';
import { integerInRange, nonEmptyString, onlyKnownKeys } from '../model/validate.js';
import { debounceScope, throttleScope } from '../persistence/dedupe-scope.js';

/** The fields `throttle` or `debounce` set on a new job. */
export type WindowFields = Pick<JobDocument, 'throttleScope' | 'debounceScope' | 'debounceUntil'> & { runAt?: Date };

const THROTTLE_KEYS = ['key', 'windowMs'] as const;
const DEBOUNCE_KEYS = ['key', 'windowMs', 'maxWaitMs'] as const;

/**
 * Checks `throttle` and `debounce` and returns what they add to the job built at `at` to run at `runAt`: a throttle
 * scope for `runAt`'s window; a debounce scope, with `runAt` moved to the window's end (no later than `maxWaitMs`).
 * @throws InvalidOptionError for a malformed window, or a combination that would make one of the promises a lie.
 */
export function windowFields(name: string, options: EnqueueOptions, runAt: Date, at: Date): WindowFields {
  const { throttle, debounce } = options;
  if (throttle !== undefined) {
    excludes('throttle', throttle, options, ['dedupeKey', 'debounce']);
    const { key, windowMs } = windowOf('throttle', throttle, THROTTLE_KEYS);
    return { throttleScope: throttleScope(name, key, windowMs, runAt) };
  }
  if (debounce === undefined) return {};
  excludes('debounce', debounce, options, ['dedupeKey', 'runAt', 'delayMs']);
  const { key, windowMs } = windowOf('debounce', debounce, DEBOUNCE_KEYS);
  const end = addMs(at, windowMs);
  if (debounce.maxWaitMs === undefined) return { debounceScope: debounceScope(name, key), runAt: end };
  const until = addMs(at, wholeMs('debounce.maxWaitMs', debounce.maxWaitMs));
  return {
    debounceScope: debounceScope(name, key),
    debounceUntil: until,
    runAt: new Date(Math.min(end.getTime(), until.getTime())),
  };
}

function windowOf(option: string, value: unknown, known: readonly string[]): { key: string; windowMs: number } {
  if (value === null || typeof value !== 'object') {
    throw new InvalidOptionError(option, value, 'must be an object { key, windowMs }');
  }
  onlyKnownKeys(value, known, `a key of ${option}`);
  const { key, windowMs } = value as { key?: unknown; windowMs?: unknown };
  return { key: nonEmptyString(`${option}.key`, key), windowMs: wholeMs(`${option}.windowMs`, windowMs) };
}

/** A whole number of ms from 1 to MAX_DURATION_MS: a window of a fraction of a ms would number every instant alike. */
function wholeMs(option: string, value: unknown): number {
  return integerInRange(option, value, 1, MAX_DURATION_MS);
}

function excludes(option: string, value: unknown, options: EnqueueOptions, others: (keyof EnqueueOptions)[]): void {
  const other = others.find((name) => options[name] !== undefined);
  if (other !== undefined) throw new InvalidOptionError(option, value, `cannot be combined with ${other}`);
}
