import { InvalidOptionError } from '../model/errors/invalid-option.error.js';
import { duration, onlyKnownKeys } from '../model/validate.js';

/** Options of `JobsService.workerStatus` (and `JobsHealthIndicator.isHealthy`). */
export interface WorkerStatusOptions {
  /**
   * How long to wait for the database's ping before reporting it `down`: milliseconds above 0, at most 60,000
   * (`MAX_PING_TIMEOUT_MS`; a health check that waits longer is no longer a check). @default 1000
   */
  timeoutMs?: number;
}

/** Longest ping a status check waits for. */
export const MAX_PING_TIMEOUT_MS = 60_000;

const DEFAULT_PING_TIMEOUT_MS = 1_000;

const WORKER_STATUS_OPTION_KEYS: readonly string[] = ['timeoutMs'];

/** The ping timeout, checked: a NaN, 0 or negative one reported the database `down` at once, a huge one hung. */
export function resolvePingTimeout(options: WorkerStatusOptions): number {
  if (options === null || typeof options !== 'object') {
    throw new InvalidOptionError('options', options, 'must be an object');
  }
  onlyKnownKeys(options, WORKER_STATUS_OPTION_KEYS, 'a workerStatus option');
  return options.timeoutMs === undefined
    ? DEFAULT_PING_TIMEOUT_MS
    : duration('timeoutMs', options.timeoutMs, MAX_PING_TIMEOUT_MS);
}
