import { InvalidOptionError } from '../model/errors/invalid-option.error.js';
import { DEFAULT_JOBS_OPTIONS, MAX_JOB_NAME_LENGTH, MAX_TIMER_MS } from '../model/jobs.constants.js';
import type { ResolvedJobsOptions, TelemetryOptions } from '../model/jobs.options.js';
import { duration, nonEmptyString } from '../model/validate.js';
import { OTHER_LABEL } from './metric-labels.js';

/** Names `telemetry.extraJobNames` may list: each is one more series per metric. */
export const MAX_EXTRA_JOB_NAMES = 1_000;
const TELEMETRY_OPTION_KEYS: readonly string[] = ['metricsIntervalMs', 'extraJobNames'];

/** The module's `telemetry` option: `false` (off), or settings with their defaults merged. */
export function resolveTelemetry(value: unknown): ResolvedJobsOptions['telemetry'] {
  if (value === false) return false;
  const defaults = DEFAULT_JOBS_OPTIONS.telemetry;
  if (value === undefined) return { ...defaults };
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new InvalidOptionError('telemetry', value, 'must be false or an object such as { metricsIntervalMs: 15000 }');
  }
  // A misspelt key would silently leave names folded into `_other`: refuse it.
  const unknown = Object.keys(value).find((key) => !TELEMETRY_OPTION_KEYS.includes(key));
  if (unknown !== undefined) {
    const given = (value as Record<string, unknown>)[unknown];
    throw new InvalidOptionError(
      `telemetry.${unknown}`,
      given,
      `is not a telemetry option (${TELEMETRY_OPTION_KEYS.join(', ')})`,
    );
  }
  const given = value as TelemetryOptions;
  return {
    metricsIntervalMs: duration(
      'telemetry.metricsIntervalMs',
      given.metricsIntervalMs ?? defaults.metricsIntervalMs,
      MAX_TIMER_MS,
    ),
    extraJobNames: extraJobNames(given.extraJobNames ?? defaults.extraJobNames),
  };
}

function extraJobNames(value: unknown): string[] {
  const option = 'telemetry.extraJobNames';
  if (!Array.isArray(value) || value.length > MAX_EXTRA_JOB_NAMES) {
    throw new InvalidOptionError(option, value, `must be an array of at most ${MAX_EXTRA_JOB_NAMES} job names`);
  }
  const names = value.map((name, index) => nonEmptyString(`${option}[${index}]`, name, MAX_JOB_NAME_LENGTH));
  const reserved = names.indexOf(OTHER_LABEL);
  if (reserved !== -1) {
    throw new InvalidOptionError(`${option}[${reserved}]`, OTHER_LABEL, 'is the label of every other name, not a name');
  }
  return [...new Set(names)];
}
