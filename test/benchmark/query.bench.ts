import type { Collection } from 'mongodb';
import { JobsService } from '../../lib';
import { type BenchContext, benchDbName, createBenchApp, dropDatabase, pendingJobDoc } from './bench-app';
import { type BenchConfig, fmt, fmtInt, formatTable, log, median, nowMs, percentile } from './helpers';

const NAMES = ['query.email', 'query.report', 'query.sync', 'query.billing'];
const STATUSES = ['completed', 'completed', 'completed', 'pending', 'dead', 'failed', 'cancelled', 'running'];
const HOUR_MS = 3_600_000;

export interface QueryTimings {
  label: string;
  samples: number;
  medianMs: number;
  p95Ms: number;
}

/**
 * The read side of a dashboard over `queryJobs` rows (4 names, mixed statuses, finishes spread over the last hour):
 * `list`'s first page, a deep page reached by cursor (¾ of the way down), a filtered first page, and `metrics` over
 * one hour in one-minute buckets. Each is timed `querySamples` times, one call at a time.
 */
export async function runQuery(ctx: BenchContext, config: BenchConfig) {
  const dbName = benchDbName('query');
  const db = ctx.client.db(dbName);
  const app = await createBenchApp(ctx.uri, dbName, { worker: false, retention: false });
  const results: QueryTimings[] = [];
  try {
    const collection = db.collection('jobs');
    log(`query: inserting ${fmtInt(config.queryJobs)} rows`);
    await insertMixedRows(collection, config.queryJobs);
    const jobs = app.get(JobsService);

    let deepCursor: string | undefined;
    for (let seen = 0; seen < (config.queryJobs * 3) / 4; seen += 200) {
      deepCursor = (await jobs.list({ limit: 200, cursor: deepCursor })).nextCursor ?? undefined;
    }
    const scenarios: [string, () => Promise<unknown>][] = [
      ['list: first page (50)', () => jobs.list()],
      [
        `list: deep page by cursor (after ~${fmtInt((config.queryJobs * 3) / 4)} rows)`,
        () => jobs.list({ cursor: deepCursor }),
      ],
      ['list: first page, status dead + name', () => jobs.list({ status: 'dead', name: NAMES[1] })],
      ['list: search by dedupe key', () => jobs.list({ search: 'key-777' })],
      ['metrics: 1 h window, 1 min buckets', () => jobs.metrics({ windowMs: HOUR_MS, bucketMs: 60_000 })],
    ];
    for (const [label, call] of scenarios) {
      await call(); // warm-up
      const times: number[] = [];
      for (let i = 0; i < config.querySamples; i += 1) {
        const t0 = nowMs();
        await call();
        times.push(nowMs() - t0);
      }
      results.push({ label, samples: times.length, medianMs: median(times), p95Ms: percentile(times, 95) });
      log(`query: ${label}: median ${fmt(median(times), 2)} ms`);
    }
  } finally {
    await app.close();
    await dropDatabase(db);
  }
  const table = formatTable(
    `8. Query API over ${fmtInt(config.queryJobs)} jobs (${config.querySamples} sequential calls each)`,
    ['call', 'median (ms)', 'p95 (ms)'],
    results.map((r) => [r.label, fmt(r.medianMs, 2), fmt(r.p95Ms, 2)]),
  );
  return { config: { jobs: config.queryJobs, samples: config.querySamples }, results, table };
}

async function insertMixedRows(collection: Collection, count: number): Promise<void> {
  const now = Date.now();
  const batchSize = 5_000;
  for (let offset = 0; offset < count; offset += batchSize) {
    const docs = [];
    for (let i = offset; i < Math.min(count, offset + batchSize); i += 1) {
      const createdAt = new Date(now - HOUR_MS + Math.floor((i / count) * HOUR_MS));
      const status = STATUSES[i % STATUSES.length];
      const doc = pendingJobDoc(NAMES[i % NAMES.length], { i }, createdAt) as unknown as Record<string, unknown>;
      doc.status = status;
      doc.dedupeKey = `key-${i}`;
      if (status !== 'pending' && status !== 'running') doc.finishedAt = new Date(createdAt.getTime() + 1_000);
      docs.push(doc);
    }
    await collection.insertMany(docs, { ordered: false });
  }
}
