import { JobsService } from '../../lib';
import { type BenchContext, benchDbName, createBenchApp, dropDatabase } from './bench-app';
import { type BenchConfig, fmt, fmtInt, formatTable, log, median, medianOf, nowMs } from './helpers';

export interface EnqueueRep {
  oneByOneMs: number;
  oneByOneJobsPerSecond: number;
  /** Median latency of one `enqueue` call. */
  oneByOneCallP50Ms: number;
  manyMs: number;
  manyJobsPerSecond: number;
}

/**
 * `enqueue` awaited one at a time vs one `enqueueMany`. The app has `worker: false` so no poll loop competes for the
 * server (a worker would start claiming the rows while they are being written).
 */
export async function runEnqueue(ctx: BenchContext, config: BenchConfig) {
  const n = config.enqueueJobs;
  const dbName = benchDbName('enqueue');
  const app = await createBenchApp(ctx.uri, dbName, { worker: false });
  const reps: EnqueueRep[] = [];
  try {
    const jobs = app.get(JobsService);
    const collection = ctx.client.db(dbName).collection('jobs');
    // Warm-up: the first calls open pool connections and JIT the path.
    for (let i = 0; i < 20; i += 1) await jobs.enqueue('bench.enqueue', { i });
    for (let rep = 1; rep <= config.repetitions; rep += 1) {
      await collection.deleteMany({});
      log(`enqueue rep ${rep}/${config.repetitions}: ${n} one by one, then enqueueMany(${n})`);
      const calls: number[] = [];
      const t0 = nowMs();
      for (let i = 0; i < n; i += 1) {
        const start = nowMs();
        await jobs.enqueue('bench.enqueue', { i });
        calls.push(nowMs() - start);
      }
      const oneByOneMs = nowMs() - t0;
      await collection.deleteMany({});
      const items = Array.from({ length: n }, (_, i) => ({ name: 'bench.enqueue', payload: { i } }));
      const t1 = nowMs();
      await jobs.enqueueMany(items);
      const manyMs = nowMs() - t1;
      reps.push({
        oneByOneMs,
        oneByOneJobsPerSecond: (n / oneByOneMs) * 1000,
        oneByOneCallP50Ms: median(calls),
        manyMs,
        manyJobsPerSecond: (n / manyMs) * 1000,
      });
    }
  } finally {
    await app.close();
    await dropDatabase(ctx.client.db(dbName));
  }
  const table = formatTable(
    `2. Enqueue ${n} jobs (worker: false; medians of ${reps.length} reps)`,
    ['method', 'jobs/s', 'total ms', 'per call p50 ms'],
    [
      [
        'enqueue, one at a time',
        fmtInt(medianOf(reps, (r) => r.oneByOneJobsPerSecond)),
        fmtInt(medianOf(reps, (r) => r.oneByOneMs)),
        fmt(
          medianOf(reps, (r) => r.oneByOneCallP50Ms),
          2,
        ),
      ],
      [
        `enqueueMany(${n})`,
        fmtInt(medianOf(reps, (r) => r.manyJobsPerSecond)),
        fmtInt(medianOf(reps, (r) => r.manyMs)),
        '–',
      ],
    ],
  );
  return { config: { jobs: n }, reps, table };
}
