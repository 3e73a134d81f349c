import { InvalidOptionError } from '../model/errors/invalid-option.error.js';
import { MAX_JOB_NAME_LENGTH } from '../model/jobs.constants.js';
import { duration, nonEmptyString } from '../model/validate.js';

/** The time series of `JobsService.metrics`: a window back from now, cut into equal buckets. */
export interface JobMetricsOptions {
  /** How far back the series reaches, in ms. */
  windowMs: number;
  /** Width of one bucket, in ms (an integer); at most 1,000 buckets per window. */
  bucketMs: number;
  /**
   * Job names whose own time buckets to return (at most 50; `[]` for the total only). Default: up to 20 names, those
   * with the most failed + dead rows (fewer when the window spans over 380 buckets: see `MAX_METRICS_SERIES_BUCKETS`).
   * Counts are returned for every name either way.
   */
  names?: readonly string[];
}

/** What `metrics` checks before any query: its options, the bucket count and the names to chart. */
export interface ResolvedMetricsOptions {
  windowMs: number;
  bucketMs: number;
  /** The names asked for, or undefined for the default choice (at most `defaultNames` of them). */
  names: readonly string[] | undefined;
  /** How many names the default choice charts: the budget shared by the names' series and the total. */
  defaultNames: number;
}

export const MAX_METRICS_BUCKETS = 1_000;
/** Names one `metrics` call may ask buckets for. */
export const MAX_METRICS_NAMES = 50;
/** Names the default answer charts at most. */
export const DEFAULT_METRICS_NAMES = 20;
/**
 * Buckets one answer may carry, every series together (the names' and the total): about 70 bytes of JSON each, so
 * the series of one answer stay under 600 KB whatever the window and the number of job names.
 */
export const MAX_METRICS_SERIES_BUCKETS = 8_000;
const METRICS_OPTION_KEYS: readonly string[] = ['windowMs', 'bucketMs', 'names'];

/** Checks `metrics`' options before any query. */
export function resolveMetricsOptions(options: JobMetricsOptions): ResolvedMetricsOptions {
  if (options === null || typeof options !== 'object') {
    throw new InvalidOptionError('options', options, 'must be an object with windowMs and bucketMs');
  }
  const unknown = Object.keys(options).find((key) => !METRICS_OPTION_KEYS.includes(key));
  if (unknown !== undefined) {
    const given = (options as unknown as Record<string, unknown>)[unknown];
    throw new InvalidOptionError(unknown, given, `is not a metrics option (${METRICS_OPTION_KEYS.join(', ')})`);
  }
  const windowMs = duration('windowMs', options.windowMs);
  const bucketMs = duration('bucketMs', options.bucketMs);
  // Buckets are aligned on the epoch by integer arithmetic on the server.
  if (!Number.isInteger(bucketMs)) throw new InvalidOptionError('bucketMs', bucketMs, 'must be an integer');
  if (bucketMs > windowMs) throw new InvalidOptionError('bucketMs', bucketMs, `must not exceed windowMs (${windowMs})`);
  if (windowMs / bucketMs > MAX_METRICS_BUCKETS) {
    throw new InvalidOptionError(
      'bucketMs',
      bucketMs,
      `must cut windowMs (${windowMs}) into at most ${MAX_METRICS_BUCKETS} buckets (at least ${Math.ceil(windowMs / MAX_METRICS_BUCKETS)} ms)`,
    );
  }
  // The window is rounded out to whole buckets: one more than the quotient at most.
  const seriesBuckets = Math.ceil(windowMs / bucketMs) + 1;
  const seriesInBudget = Math.floor(MAX_METRICS_SERIES_BUCKETS / seriesBuckets); // the total's series included
  const names = options.names === undefined ? undefined : seriesNames(options.names);
  if (names && names.length + 1 > seriesInBudget) {
    throw new InvalidOptionError(
      'names',
      names,
      `asks for ${names.length + 1} series (the total included) of ${seriesBuckets} buckets, over the budget of ` +
        `${MAX_METRICS_SERIES_BUCKETS} buckets per answer: ask for at most ${seriesInBudget - 1} names, or wider buckets`,
    );
  }
  return { windowMs, bucketMs, names, defaultNames: Math.min(DEFAULT_METRICS_NAMES, seriesInBudget - 1) };
}

function seriesNames(value: unknown): string[] {
  if (!Array.isArray(value) || value.length > MAX_METRICS_NAMES) {
    throw new InvalidOptionError('names', value, `must be an array of at most ${MAX_METRICS_NAMES} job names`);
  }
  const names = value.map((name, index) => nonEmptyString(`names[${index}]`, name, MAX_JOB_NAME_LENGTH));
  return [...new Set(names)];
}
