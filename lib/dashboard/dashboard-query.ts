import type { PurgeOptions } from '../admin/purge-options.js';
import { InvalidOptionError } from '../model/errors/invalid-option.error.js';
import type { ListJobsOptions } from '../persistence/list-jobs-options.js';
import type { JobMetricsOptions } from '../query/job-metrics-options.js';

/** A query string as Express parses it: strings, or arrays of them for repeated keys. */
export type QueryString = Record<string, unknown>;

/** Default series of `GET metrics`: the last hour by minute. */
export const DEFAULT_METRICS_OPTIONS: JobMetricsOptions = { windowMs: 3_600_000, bucketMs: 60_000 };

const ISO_DATE = /^\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,3})?)?(?:Z|[+-]\d{2}:\d{2}))?$/;

/**
 * `list`'s options from a query string: `status` as a comma list or repeated, `from`/`to` as ISO 8601 instants,
 * `limit` as a decimal integer. Other keys go on as strings, so `list` itself refuses the ones it does not know.
 */
export function listOptionsFromQuery(query: QueryString): ListJobsOptions {
  // No prototype: a `__proto__` key stays an own key that `list` refuses, instead of vanishing on assignment.
  const options: Record<string, unknown> = Object.create(null);
  for (const [key, raw] of Object.entries(query)) {
    if (key === 'status') options.status = statusList(raw);
    else if (key === 'limit') options.limit = integer(key, single(key, raw));
    else if (key === 'from' || key === 'to') options[key] = isoDate(key, single(key, raw));
    else options[key] = single(key, raw);
  }
  return options as ListJobsOptions;
}

/**
 * `metrics`' options from a query string, the window defaulting to the last hour by minute; `names` repeated, one job
 * name per value (not comma-separated: a job name may hold a comma).
 */
export function metricsOptionsFromQuery(query: QueryString): JobMetricsOptions {
  const options: Record<string, unknown> = Object.assign(Object.create(null), DEFAULT_METRICS_OPTIONS);
  for (const [key, raw] of Object.entries(query)) {
    if (key === 'names') options.names = Array.isArray(raw) ? raw : [raw];
    else options[key] = key === 'windowMs' || key === 'bucketMs' ? integer(key, single(key, raw)) : single(key, raw);
  }
  return options as unknown as JobMetricsOptions;
}

/** `purge`'s options from a JSON body: `finishedBefore` as an ISO 8601 instant. */
export function purgeOptionsFromBody(body: unknown): PurgeOptions {
  const options = { ...jsonObject(body) };
  if (options.finishedBefore !== undefined) options.finishedBefore = isoDate('finishedBefore', options.finishedBefore);
  return options as unknown as PurgeOptions;
}

/** A JSON body that must be an object (not an array, a string or null). */
export function jsonObject(body: unknown): Record<string, unknown> {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new InvalidOptionError('body', body, 'must be a JSON object');
  }
  return body as Record<string, unknown>;
}

function single(key: string, raw: unknown): string {
  if (typeof raw !== 'string') throw new InvalidOptionError(key, raw, 'must be given once, as a single value');
  return raw;
}

function statusList(raw: unknown): string[] {
  const values = Array.isArray(raw) ? raw : [raw];
  if (!values.every((value) => typeof value === 'string')) {
    throw new InvalidOptionError('status', raw, 'must be status names, comma-separated or repeated');
  }
  return (values as string[]).flatMap((value) => value.split(','));
}

function integer(key: string, raw: string): number {
  if (!/^-?\d{1,15}$/.test(raw)) throw new InvalidOptionError(key, raw, 'must be a decimal integer');
  return Number(raw);
}

function isoDate(key: string, raw: unknown): Date {
  const date = typeof raw === 'string' && ISO_DATE.test(raw) && realDay(raw) ? new Date(raw) : null;
  if (date === null || Number.isNaN(date.getTime())) {
    throw new InvalidOptionError(key, raw, 'must be an ISO 8601 date, e.g. 2026-01-31T12:00:00Z');
  }
  return date;
}

/** Whether the string's calendar day exists: `Date` rolls 2026-02-30 over to March 2, so a filter would shift. */
function realDay(iso: string): boolean {
  const [year, month, day] = iso.slice(0, 10).split('-').map(Number) as [number, number, number];
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day); // not Date.UTC: it reads years 0-99 as 1900-1999
  return date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
}
