import { Injectable } from '@nestjs/common';
import { JobHandler, JobsService } from '../../lib';
import { type BenchContext, benchDbName, createBenchApp, dropDatabase } from './bench-app';
import { type BenchConfig, fmt, formatTable, log, median, nowMs, percentile, sleep, withTimeout } from './helpers';

const SHALLOW_JOB = 'bench.pickup.shallow';
/** Long, so that only the enqueue's wake-up explains a short pickup (as in the pickup scenario). */
const POLL_MS = 1_000;
/** The throughput scenario's concurrency: room for a batch. */
const CONCURRENCY = 16;
/** Jobs enqueued at once per sample: a lone job, and a shallow burst (below the free slots). */
const BURSTS = [1, 4] as const;
const VARIANTS = [
  // At concurrency 16 a batch takes at most the 15 slots left after the burst's first claim.
  { label: 'batched claims (claimBatchSize 32)', claimBatchSize: 32 },
  { label: 'single claims (claimBatchSize 1)', claimBatchSize: 1 },
] as const;

/** Handler start times (monotonic clock) by sequence number. */
const starts = new Map<number, (at: number) => void>();

@Injectable()
class ShallowPickupProbe {
  @JobHandler(SHALLOW_JOB)
  started(payload: { seq: number }): void {
    starts.get(payload.seq)?.(nowMs());
  }
}

interface VariantRep {
  /** Per burst size: every job's enqueue → handler start, in ms. */
  samples: Record<number, number[]>;
}

/**
 * Shallow queue, same process: an idle worker (concurrency 16) is woken by an enqueue of 1 job, or of 4 at once, and
 * each job's enqueue → handler start is timed. Run with batched claims (the default) and with `claimBatchSize: 1`,
 * interleaved rep by rep in alternating order: batching must not add latency where there is no backlog. A lone job is
 * one claim either way (a burst opens with one); a burst of 4 shows the batch (3 round trips after the first claim)
 * against single claims (up to one more in flight per job claimed). A batch needs two free slots and a backlog, so a
 * job picked up as one slot frees on a full worker is one claim either way too.
 */
export async function runShallowPickup(ctx: BenchContext, config: BenchConfig) {
  const reps = new Map<string, VariantRep[]>(VARIANTS.map((v) => [v.label, []]));
  // As many interleaved reps as the throughput rounds (9 by default), fewer samples each.
  const repetitions = config.throughputRounds;
  const samplesPerBurst = Math.max(10, Math.round(config.pickupSamples / 8));
  for (let rep = 1; rep <= repetitions; rep += 1) {
    const order = rep % 2 === 1 ? VARIANTS : [...VARIANTS].reverse();
    for (const variant of order) {
      log(`shallow pickup rep ${rep}/${repetitions}: ${variant.label}, ${samplesPerBurst} samples per burst`);
      reps.get(variant.label)?.push(await variantRep(ctx, variant.claimBatchSize, samplesPerBurst));
    }
  }
  const rows: string[][] = [];
  const summary: Record<string, Record<number, { p50: number; p95: number }>> = {};
  for (const { label } of VARIANTS) {
    summary[label] = {};
    for (const burst of BURSTS) {
      const perRep = (reps.get(label) ?? []).map((r) => r.samples[burst]);
      const p50 = median(perRep.map((s) => percentile(s, 50)));
      const p95 = median(perRep.map((s) => percentile(s, 95)));
      summary[label][burst] = { p50, p95 };
      rows.push([label, String(burst), String(perRep.flat().length), fmt(p50, 2), fmt(p95, 2)]);
    }
  }
  const table = formatTable(
    `3b. Shallow queue pickup, same process, enqueue → handler start (ms; concurrency ${CONCURRENCY}, poll ${POLL_MS} ms, median of ${repetitions} interleaved reps)`,
    ['claims', 'jobs per enqueue', 'samples', 'p50', 'p95'],
    rows,
  );
  return { concurrency: CONCURRENCY, pollIntervalMs: POLL_MS, summary, table };
}

async function variantRep(ctx: BenchContext, claimBatchSize: number, samplesPerBurst: number): Promise<VariantRep> {
  const dbName = benchDbName('pickup_shallow');
  const app = await createBenchApp(
    ctx.uri,
    dbName,
    { pollIntervalMs: POLL_MS, concurrency: CONCURRENCY, claimBatchSize },
    [ShallowPickupProbe],
  );
  let seq = 0;
  const samples: Record<number, number[]> = { 1: [], 4: [] };
  try {
    const jobs = app.get(JobsService);
    const sample = async (burst: number): Promise<number[]> => {
      const seqs = Array.from({ length: burst }, () => ++seq);
      const started = seqs.map((s) => new Promise<number>((resolve) => starts.set(s, resolve)));
      let completed = 0;
      const allCompleted = new Promise<void>((resolve) => {
        const subscription = jobs.events$.subscribe((event) => {
          if (event.type === 'completed' && ++completed === burst) {
            subscription.unsubscribe();
            resolve();
          }
        });
      });
      const t0 = nowMs();
      await jobs.enqueueMany(seqs.map((s) => ({ name: SHALLOW_JOB, payload: { seq: s } })));
      const at = await withTimeout(Promise.all(started), 10_000, `pickup of jobs ${seqs[0]}…`);
      for (const s of seqs) starts.delete(s);
      // The worker must be idle again (every completion written, the loop asleep) before the next sample.
      await withTimeout(allCompleted, 10_000, `completion of jobs ${seqs[0]}…`);
      await sleep(5 + Math.random() * 10);
      return at.map((a) => a - t0);
    };
    for (let i = 0; i < 5; i += 1) await sample(BURSTS[i % BURSTS.length]); // warm-up
    for (let i = 0; i < samplesPerBurst * BURSTS.length; i += 1) {
      const burst = BURSTS[i % BURSTS.length];
      samples[burst].push(...(await sample(burst)));
    }
  } finally {
    await app.close();
    await dropDatabase(ctx.client.db(dbName));
  }
  return { samples };
}
