import { InvalidOptionError } from '../errors/invalid-option.error';
import { duration } from '../utils/validate';

/** The time series of `JobsService.metrics`: a window back from now, cut into equal buckets. */
export interface JobMetricsOptions {
  /** How far back the series reaches, in ms. */
  windowMs: number;
  /** Width of one bucket, in ms (an integer); at most 1,000 buckets per window. */
  bucketMs: number;
}

export const MAX_METRICS_BUCKETS = 1_000;
const METRICS_OPTION_KEYS: readonly string[] = ['windowMs', 'bucketMs'];

/** Checks `metrics`' options before any query. */
export function resolveMetricsOptions(options: JobMetricsOptions): JobMetricsOptions {
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
  return { windowMs, bucketMs };
}
