import { InvalidOptionError } from '../errors/invalid-option.error';
import { DEFAULT_JOBS_OPTIONS, MAX_TIMER_MS } from '../jobs.constants';
import type { ResolvedJobsOptions, TelemetryOptions } from '../jobs.options';
import { duration } from '../utils/validate';

/** The module's `telemetry` option: `false` (off), or settings with their defaults merged. */
export function resolveTelemetry(value: unknown): ResolvedJobsOptions['telemetry'] {
  if (value === false) return false;
  const defaults = DEFAULT_JOBS_OPTIONS.telemetry;
  if (value === undefined) return { ...defaults };
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new InvalidOptionError('telemetry', value, 'must be false or an object such as { metricsIntervalMs: 15000 }');
  }
  const given = value as TelemetryOptions;
  return {
    metricsIntervalMs: duration(
      'telemetry.metricsIntervalMs',
      given.metricsIntervalMs ?? defaults.metricsIntervalMs,
      MAX_TIMER_MS,
    ),
  };
}
