import { mongo } from 'mongoose';
import { InvalidProgressError } from './errors/invalid-progress.error.js';
import type { JobProgress } from './job-record.js';
import { MAX_PROGRESS_BYTES } from './jobs.constants.js';
import { assertStorableValue } from './payload-validator.js';

/**
 * Accepts a number from 0 to 100, or a plain object that follows the payload rules and is at most
 * {@link MAX_PROGRESS_BYTES} as BSON; throws {@link InvalidProgressError} naming the problem for anything else.
 */
export function assertValidProgress(value: unknown): asserts value is JobProgress {
  if (typeof value === 'number') {
    if (!(value >= 0 && value <= 100)) throw new InvalidProgressError('', `is ${value}, not a number from 0 to 100`);
    return;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InvalidProgressError('', `is ${kindOf(value)}`);
  }
  assertStorableValue(value, (path, problem) => new InvalidProgressError(path, problem));
  const bytes = mongo.BSON.calculateObjectSize(value, { ignoreUndefined: true });
  if (bytes > MAX_PROGRESS_BYTES) {
    throw new InvalidProgressError('', `is ${bytes} bytes as BSON, over the limit of ${MAX_PROGRESS_BYTES}`);
  }
}

/**
 * A valid progress value as it is now: an object is copied through BSON, so what the handler does to it after
 * passing it changes neither what is written nor what the checks allowed.
 * @throws InvalidProgressError as `assertValidProgress`.
 */
export function progressSnapshot(value: unknown): JobProgress {
  assertValidProgress(value);
  if (typeof value === 'number') return value;
  return mongo.BSON.deserialize(mongo.BSON.serialize(value, { ignoreUndefined: true })) as JobProgress;
}

function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (value === undefined) return 'undefined';
  if (Array.isArray(value)) return 'an array';
  return `a ${typeof value}`;
}
