import { InvalidOptionError } from '../model/errors/invalid-option.error.js';
import { FINISHED_STATUSES } from '../model/job-record.js';
import { DEFAULT_JOBS_OPTIONS, MAX_TIMER_MS } from '../model/jobs.constants.js';
import type { ResolvedJobsOptions, RetentionPeriods } from '../model/jobs.options.js';
import { duration } from '../model/validate.js';

const KEEP_ALL: RetentionPeriods = { completed: null, dead: null, failed: null, cancelled: null };

/** The module's `retention` option: defaults merged, every value checked, `false` as "keep everything". */
export function resolveModuleRetention(value: unknown): ResolvedJobsOptions['retention'] {
  const defaults = DEFAULT_JOBS_OPTIONS.retention;
  if (value === false) return { periods: KEEP_ALL, sweepIntervalMs: defaults.sweepIntervalMs };
  const given = retentionObject('retention', value ?? {}, true);
  return {
    periods: periods('retention', given, defaults),
    sweepIntervalMs: duration(
      'retention.sweepIntervalMs',
      given.sweepIntervalMs ?? defaults.sweepIntervalMs,
      MAX_TIMER_MS,
    ),
  };
}

/**
 * A `@JobHandler`'s `retention` (`option` names it in errors): undefined follows the module's, `false` keeps its jobs
 * for good, an object overrides the module's status by status.
 */
export function resolveHandlerRetention(
  option: string,
  value: unknown,
  moduleRetention: RetentionPeriods,
): RetentionPeriods | undefined {
  if (value === undefined) return undefined;
  if (value === false) return KEEP_ALL;
  return periods(option, retentionObject(option, value, false), moduleRetention);
}

function periods(
  option: string,
  given: Record<string, unknown>,
  fallback: Readonly<Record<keyof RetentionPeriods, number | null>>,
): RetentionPeriods {
  const resolved = { ...KEEP_ALL };
  for (const status of FINISHED_STATUSES) {
    const ms = given[status] ?? fallback[status];
    resolved[status] = ms === null ? null : duration(`${option}.${status}`, ms);
  }
  return resolved;
}

/** A plain object with known keys only: a misspelt status would otherwise be ignored silently. */
function retentionObject(option: string, value: unknown, withSweep: boolean): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new InvalidOptionError(option, value, 'must be an object of milliseconds per final status, or false');
  }
  const known: readonly string[] = withSweep ? [...FINISHED_STATUSES, 'sweepIntervalMs'] : FINISHED_STATUSES;
  const unknown = Object.keys(value).find((key) => !known.includes(key));
  if (unknown !== undefined) {
    const record = value as Record<string, unknown>;
    throw new InvalidOptionError(`${option}.${unknown}`, record[unknown], `is not one of ${known.join(', ')}`);
  }
  return value as Record<string, unknown>;
}
