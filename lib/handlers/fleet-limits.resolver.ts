import { InvalidOptionError } from '../model/errors/invalid-option.error.js';
import { duration, positiveInteger } from '../model/validate.js';
import type { FleetLimits } from './fleet-limits.js';

/** Slots per name (and per group): each claim lists them, so they stay a short `$in`. */
export const MAX_SLOTS = 1000;
/** Start tokens per rate-limited name: one document each in `<collection>_rate_tokens`. */
export const MAX_RATE_TOKENS = 10_000;

/** What `@JobHandler` accepts for the fleet-wide limits (validated by `resolveFleetLimits`). */
export interface FleetLimitOptions {
  globalConcurrency?: number;
  rateLimit?: { max: number; perMs: number };
  groupConcurrency?: number;
}

/**
 * Validates a handler's fleet-wide limits.
 * @throws InvalidOptionError naming the option for zero, negative, fractional or non-finite values, or a limit above
 * the number of slots or tokens a claim can list
 */
export function resolveFleetLimits(options: FleetLimitOptions, option: (key: string) => string): FleetLimits {
  const limits: FleetLimits = {};
  if (options.globalConcurrency !== undefined)
    limits.globalConcurrency = bounded(option('globalConcurrency'), options.globalConcurrency, MAX_SLOTS);
  if (options.groupConcurrency !== undefined)
    limits.groupConcurrency = bounded(option('groupConcurrency'), options.groupConcurrency, MAX_SLOTS);
  if (options.rateLimit !== undefined) {
    const rateLimit: unknown = options.rateLimit;
    if (rateLimit === null || typeof rateLimit !== 'object')
      throw new InvalidOptionError(option('rateLimit'), rateLimit, 'must be an object { max, perMs }');
    const { max, perMs } = rateLimit as { max?: unknown; perMs?: unknown };
    limits.rateLimit = {
      max: bounded(option('rateLimit.max'), max, MAX_RATE_TOKENS),
      perMs: duration(option('rateLimit.perMs'), perMs),
    };
  }
  return limits;
}

function bounded(option: string, value: unknown, max: number): number {
  const count = positiveInteger(option, value);
  if (count > max) throw new InvalidOptionError(option, value, `must be at most ${max}`);
  return count;
}
