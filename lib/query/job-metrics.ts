import { JOB_STATUSES, type JobStatus } from '../model/job-record.js';
import type { JobReadStore } from '../persistence/job-read.store.js';
import { chartedNames } from './charted-names.js';
import type { ResolvedMetricsOptions } from './job-metrics-options.js';

/** Final statuses the time series counts: what charts plot as throughput and failures. */
const SERIES_STATUSES = ['completed', 'dead', 'failed'] as const;
type SeriesStatus = (typeof SERIES_STATUSES)[number];

/** Jobs that reached a final status within one bucket (by `finishedAt`). */
export interface JobMetricsBucket {
  /** Start of the bucket (buckets are aligned on multiples of `bucketMs` since the epoch). */
  start: Date;
  completed: number;
  dead: number;
  failed: number;
}

/** The figures of one job name. */
export interface JobNameMetrics {
  name: string;
  /** Rows per status now (every status present, zero included). */
  counts: Record<JobStatus, number>;
  /** Queue latency: how long the oldest due pending job has waited past its `runAt`; null when none is waiting. */
  oldestPendingAgeMs: number | null;
  /**
   * Oldest bucket first, every bucket of the window present (zeros included), the last one still filling; null for
   * a name whose buckets were not asked for (`names`) or not among the default choice.
   */
  buckets: JobMetricsBucket[] | null;
  /** Whether the name is paused fleet-wide (`JobsService.pause`): its pending jobs wait for `resume`. */
  paused: boolean;
}

/** What `JobsService.metrics` returns. */
export interface JobMetrics {
  /** The instant the figures were taken at (the worker clock). */
  at: Date;
  windowMs: number;
  bucketMs: number;
  /** One entry per job name with at least one row, sorted by name; `buckets` only for the charted names. */
  names: JobNameMetrics[];
  /** Every job name's finished jobs per bucket, charted or not: the queue's throughput. Same buckets as `names`. */
  total: JobMetricsBucket[];
  /** Every name paused fleet-wide, sorted, with rows or not. */
  paused: string[];
}

/**
 * Counts and queue latency of every name, the total per bucket, then the buckets of the names asked for (or of the
 * default choice, which needs the counts first). The window is rounded out to whole buckets: from the start of the
 * bucket holding `now - windowMs` to the end of the one holding `now`.
 */
export async function collectJobMetrics(
  reads: JobReadStore,
  { windowMs, bucketMs, names, defaultNames }: ResolvedMetricsOptions,
  at: Date,
  readPaused: () => Promise<readonly string[]>,
): Promise<JobMetrics> {
  const firstStart = bucketStart(at.getTime() - windowMs, bucketMs);
  const lastStart = bucketStart(at.getTime(), bucketMs);
  const from = new Date(firstStart);
  const until = new Date(lastStart + bucketMs);
  const emptyBuckets = (): JobMetricsBucket[] => {
    const buckets: JobMetricsBucket[] = [];
    for (let start = firstStart; start <= lastStart; start += bucketMs) {
      buckets.push({ start: new Date(start), completed: 0, dead: 0, failed: 0 });
    }
    return buckets;
  };
  const perName = (charted: readonly string[]) =>
    charted.length === 0 ? [] : reads.finishedPerBucket(SERIES_STATUSES, from, until, bucketMs, charted);
  const [counts, oldest, totals, asked, paused] = await Promise.all([
    reads.countByNameAndStatus(),
    reads.oldestDuePending(at),
    reads.finishedTotalPerBucket(SERIES_STATUSES, from, until, bucketMs),
    names && perName(names),
    readPaused(),
  ]);
  const byName = new Map<string, JobNameMetrics>();
  const entry = (name: string): JobNameMetrics => {
    let metrics = byName.get(name);
    if (!metrics) {
      const zero = Object.fromEntries(JOB_STATUSES.map((status) => [status, 0])) as Record<JobStatus, number>;
      metrics = { name, counts: zero, oldestPendingAgeMs: null, buckets: null, paused: false };
      byName.set(name, metrics);
    }
    return metrics;
  };
  for (const { _id, count } of counts) {
    // A hand-written row may lack a name or carry an unknown status; it is counted nowhere rather than crash.
    if (typeof _id.name === 'string' && JOB_STATUSES.includes(_id.status)) entry(_id.name).counts[_id.status] = count;
  }
  for (const { _id: name, runAt } of oldest) {
    if (typeof name === 'string' && runAt instanceof Date) {
      entry(name).oldestPendingAgeMs = Math.max(0, at.getTime() - runAt.getTime());
    }
  }
  const total = emptyBuckets();
  for (const { _id, count } of totals) {
    const bucket = total[(Number(_id.bucket) - firstStart) / bucketMs];
    if (bucket && isSeriesStatus(_id.status)) bucket[_id.status] = count;
  }
  // A name asked for without rows gets no entry: the answer lists the names that have rows.
  const charted = (names ?? chartedNames(byName.values(), defaultNames)).filter((name) => byName.has(name));
  for (const name of charted) entry(name).buckets = emptyBuckets();
  for (const { _id, count } of asked ?? (await perName(charted))) {
    const index = (Number(_id.bucket) - firstStart) / bucketMs;
    const bucket = typeof _id.name === 'string' ? byName.get(_id.name)?.buckets?.[index] : undefined;
    if (bucket && isSeriesStatus(_id.status)) bucket[_id.status] = count;
  }
  const sorted = [...byName.values()].sort((a, b) => (a.name < b.name ? -1 : 1));
  for (const metrics of sorted) metrics.paused = paused.includes(metrics.name);
  return { at, windowMs, bucketMs, names: sorted, total, paused: [...paused] };
}

function bucketStart(ms: number, bucketMs: number): number {
  return ms - (((ms % bucketMs) + bucketMs) % bucketMs);
}

function isSeriesStatus(status: string): status is SeriesStatus {
  return (SERIES_STATUSES as readonly string[]).includes(status);
}
