import type { Collection } from 'mongodb';
import { JobsService } from '../../lib';
import type { JobMetricsOptions } from '../../lib/query/job-metrics-options';
import { type BenchContext, benchDbName, createBenchApp, dropDatabase, pendingJobDoc } from './bench-app';
import { type BenchConfig, envInt, fmt, fmtInt, formatTable, log, median, nowMs } from './helpers';

const HOUR_MS = 3_600_000;
/** Per name: finished rows spread over the last hour, and one pending row. */
const STATUSES = ['completed', 'completed', 'completed', 'failed', 'dead', 'pending'];

export interface MetricsNamesResult {
  label: string;
  samples: number;
  /** UTF-8 bytes of the answer as the dashboard API sends it (JSON). */
  bytes: number;
  /** Names in the answer with counts, and those with buckets. */
  names: number;
  chartedNames: number;
  medianMs: number;
  maxMs: number;
}

/**
 * `metrics` over many run-time job names (`tenant.<i>.sync`, BENCH_METRICS_NAMES, default 2,000; each with a few
 * rows): the default answer (no `names`) for the dashboard page's window (1 h by minute) and for the finest window
 * allowed (1 h in 1,000 buckets, the request of issue 22), then the most names that window allows. Size is the JSON a
 * dashboard request returns; time is the call, BENCH_METRICS_SAMPLES (default 5) sequential calls after a warm-up.
 * Reported, never asserted: the target (at most 1 MB for 2,000 names) is checked by reading the table.
 */
export async function runMetricsNames(ctx: BenchContext, config: BenchConfig) {
  const nameCount = envInt('BENCH_METRICS_NAMES', config.quick ? 200 : 2_000);
  const samples = envInt('BENCH_METRICS_SAMPLES', config.quick ? 2 : 5);
  const dbName = benchDbName('metrics_names');
  const db = ctx.client.db(dbName);
  const app = await createBenchApp(ctx.uri, dbName, { worker: false, retention: false });
  const results: MetricsNamesResult[] = [];
  try {
    log(`metricsNames: inserting ${fmtInt(nameCount * STATUSES.length)} rows over ${fmtInt(nameCount)} names`);
    await insertRows(db.collection('jobs'), nameCount);
    const jobs = app.get(JobsService);
    const finest = { windowMs: HOUR_MS, bucketMs: 3_600 };
    const calls: [string, JobMetricsOptions][] = [
      ['default: 1 h by minute (the page)', { windowMs: HOUR_MS, bucketMs: 60_000 }],
      ['default: 1 h in 1,000 buckets', finest],
      ['names: 6 (the most 1,000 buckets allow)', { ...finest, names: tenants(6) }],
    ];
    for (const [label, options] of calls) {
      const warm = await jobs.metrics(options);
      const times: number[] = [];
      for (let i = 0; i < samples; i += 1) {
        const t0 = nowMs();
        await jobs.metrics(options);
        times.push(nowMs() - t0);
      }
      results.push({
        label,
        samples,
        bytes: Buffer.byteLength(JSON.stringify(warm)),
        names: warm.names.length,
        chartedNames: warm.names.filter((entry) => entry.buckets !== null).length,
        medianMs: median(times),
        maxMs: Math.max(...times),
      });
      log(`metricsNames: ${label}: ${fmt(results.at(-1)?.bytes ?? 0, 0)} bytes, median ${fmt(median(times), 1)} ms`);
    }
  } finally {
    await app.close();
    await dropDatabase(db);
  }
  const table = formatTable(
    `Metrics over ${fmtInt(nameCount)} job names (${samples} sequential calls each; target: default answer ≤ 1 MB)`,
    ['call', 'names counted', 'names charted', 'answer (KB)', 'median (ms)', 'max (ms)'],
    results.map((r) => [
      r.label,
      fmtInt(r.names),
      fmtInt(r.chartedNames),
      fmt(r.bytes / 1024, 1),
      fmt(r.medianMs, 1),
      fmt(r.maxMs, 1),
    ]),
  );
  return { config: { names: nameCount, samples }, results, table };
}

function tenants(count: number): string[] {
  return Array.from({ length: count }, (_, i) => `tenant.${i}.sync`);
}

async function insertRows(collection: Collection, nameCount: number): Promise<void> {
  const now = Date.now();
  const docs = [];
  for (const [i, name] of tenants(nameCount).entries()) {
    for (const [s, status] of STATUSES.entries()) {
      const createdAt = new Date(now - HOUR_MS + ((i * STATUSES.length + s) % HOUR_MS));
      const doc = pendingJobDoc(name, { i }, createdAt) as unknown as Record<string, unknown>;
      doc.status = status;
      if (status !== 'pending') doc.finishedAt = new Date(now - ((i * 7_919 + s * 104_729) % HOUR_MS));
      docs.push(doc);
    }
  }
  for (let offset = 0; offset < docs.length; offset += 5_000) {
    await collection.insertMany(docs.slice(offset, offset + 5_000), { ordered: false });
  }
}
