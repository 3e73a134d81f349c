import { Injectable } from '@nestjs/common';
import { getConnectionToken } from '@nestjs/mongoose';
import type { Connection } from 'mongoose';
import { JobHandler, JobsService } from '../../lib';
import { type BenchContext, benchDbName, CommandCounter, createBenchApp, dropDatabase } from './bench-app';
import { type BenchConfig, envInt, fmt, formatTable, log, median, nowMs, withTimeout } from './helpers';

/**
 * Fleet-wide limits (issue 16): what a limit costs when it never binds, whether a saturated name slows an unlimited
 * one down, and how close a rate limit runs to its minimum time. Reported, never asserted.
 */
const CONCURRENCY = 16;
/** Far above the concurrency: the limits below never bind, so only their protocol's cost is measured. */
const NEVER_BINDS = 1000;
const TIMEOUT_MS = 180_000;

type Variant = 'unlimited' | 'globalConcurrency' | 'groupConcurrency' | 'rateLimit';
const VARIANTS: Variant[] = ['unlimited', 'globalConcurrency', 'groupConcurrency', 'rateLimit'];
const NAME: Record<Variant, string> = {
  unlimited: 'bench.unlimited',
  globalConcurrency: 'bench.global',
  groupConcurrency: 'bench.group',
  rateLimit: 'bench.rate',
};

@Injectable()
class LimitJobs {
  @JobHandler('bench.unlimited')
  unlimited(): void {}

  @JobHandler('bench.global', { globalConcurrency: NEVER_BINDS })
  global(): void {}

  @JobHandler('bench.group', { groupConcurrency: NEVER_BINDS })
  group(): void {}

  @JobHandler('bench.rate', { rateLimit: { max: 1000, perMs: 1000 } })
  rate(): void {}
}

let gate: Promise<void> = Promise.resolve();

@Injectable()
class PickupJobs {
  @JobHandler('bench.fast')
  fast(): void {}

  /** Saturated for the whole measurement: one runs (blocked on the gate), the rest wait for its slot. */
  @JobHandler('bench.saturated', { globalConcurrency: 1 })
  saturated(): Promise<void> {
    return gate;
  }

  @JobHandler('bench.rate10', { rateLimit: { max: 10, perMs: 1000 } })
  rate10(): void {}
}

interface VariantTrial {
  variant: Variant;
  jobsPerSecond: number;
  commandsPerJob: Record<string, number>;
}

export async function runLimits(ctx: BenchContext, config: BenchConfig) {
  const jobs = envInt('BENCH_LIMITS_JOBS', config.quick ? 300 : 1_000);
  const rounds = envInt('BENCH_LIMITS_ROUNDS', config.quick ? 1 : 3);
  const trials: VariantTrial[] = [];
  for (let round = 1; round <= rounds; round += 1) {
    for (const variant of VARIANTS) {
      log(`limits round ${round}/${rounds}: ${variant}, ${jobs} jobs`);
      trials.push(await throughputTrial(ctx, variant, jobs));
    }
  }
  const pickup = await pickupTrial(ctx, config.quick ? 10 : 30);
  const rate = await rateTrial(ctx, 60);

  const byVariant = (variant: Variant) => trials.filter((t) => t.variant === variant);
  const baseline = median(byVariant('unlimited').map((t) => t.jobsPerSecond));
  const rows = VARIANTS.map((variant) => {
    const own = byVariant(variant);
    const jps = median(own.map((t) => t.jobsPerSecond));
    const commands = own[own.length - 1].commandsPerJob;
    const total = Object.values(commands).reduce((sum, n) => sum + n, 0);
    return [
      variant,
      fmt(jps, 0),
      `${fmt(jps / baseline, 2)}×`,
      fmt(total, 2),
      Object.entries(commands)
        .map(([kind, n]) => `${kind} ${fmt(n, 2)}`)
        .join(', '),
    ];
  });
  const table = [
    formatTable(
      `Fleet-wide limits that never bind: ${jobs} no-op jobs, concurrency ${CONCURRENCY}, one worker, median of ${rounds} round(s)`,
      ['variant', 'jobs/s', 'vs unlimited', 'commands/job', 'by kind'],
      rows,
    ),
    formatTable(
      `Pickup latency of an unlimited name (enqueue → started), ${pickup.samples} jobs one at a time`,
      ['with', 'median ms', 'max ms'],
      [
        ['no other name', fmt(pickup.alone.median, 1), fmt(pickup.alone.max, 1)],
        [
          'a saturated limited name (globalConcurrency 1, 50 waiting)',
          fmt(pickup.saturated.median, 1),
          fmt(pickup.saturated.max, 1),
        ],
      ],
    ),
    formatTable(
      `rateLimit { max: 10, perMs: 1000 }: ${rate.jobs} jobs, one worker`,
      ['minimum ms', 'measured ms', 'measured / minimum'],
      [[fmt(rate.minimumMs, 0), fmt(rate.totalMs, 0), `${fmt(rate.totalMs / rate.minimumMs, 2)}×`]],
    ),
  ].join('\n');
  return { jobs, rounds, trials, pickup, rate, table };
}

async function throughputTrial(ctx: BenchContext, variant: Variant, n: number): Promise<VariantTrial> {
  const dbName = benchDbName('limits');
  const app = await createBenchApp(ctx.uri, dbName, { concurrency: CONCURRENCY, pollIntervalMs: 1000 }, [LimitJobs], {
    monitorCommands: true,
  });
  try {
    const jobs = app.get(JobsService);
    const commands = new CommandCounter(app.get<Connection>(getConnectionToken()).getClient() as never);
    const done = completions(jobs, n);
    const items = Array.from({ length: n }, (_, i) => ({
      name: NAME[variant],
      payload: { i },
      options: variant === 'groupConcurrency' ? { group: `g${i % 10}` } : {},
    }));
    await jobs.enqueueMany(items);
    const before = done.count();
    commands.start();
    const t0 = nowMs();
    await withTimeout(done.all, TIMEOUT_MS, `limits ${variant}`);
    const ms = nowMs() - t0;
    return { variant, jobsPerSecond: ((n - before) / ms) * 1000, commandsPerJob: commands.stop(n - before) };
  } finally {
    await app.close();
    await dropDatabase(ctx.client.db(dbName));
  }
}

/** Enqueue → `started` of `samples` unlimited jobs, one at a time, alone and beside a saturated limited name. */
async function pickupTrial(ctx: BenchContext, samples: number) {
  const measure = async (withSaturated: boolean) => {
    const dbName = benchDbName('limits_pickup');
    let release!: () => void;
    gate = new Promise((resolve) => {
      release = resolve;
    });
    const app = await createBenchApp(ctx.uri, dbName, { concurrency: 4, pollIntervalMs: 1000 }, [PickupJobs]);
    try {
      const jobs = app.get(JobsService);
      if (withSaturated) {
        await jobs.enqueueMany(Array.from({ length: 50 }, () => ({ name: 'bench.saturated' })));
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      const latencies: number[] = [];
      for (let i = 0; i < samples; i += 1) {
        const started = new Promise<number>((resolve) => {
          const subscription = jobs.events$.subscribe((event) => {
            if (event.type === 'started' && event.name === 'bench.fast') {
              subscription.unsubscribe();
              resolve(nowMs());
            }
          });
        });
        const t0 = nowMs();
        await jobs.enqueue('bench.fast', {});
        latencies.push((await withTimeout(started, 30_000, 'pickup')) - t0);
      }
      return { median: median(latencies), max: Math.max(...latencies) };
    } finally {
      release();
      await app.close();
      await dropDatabase(ctx.client.db(dbName));
    }
  };
  return { samples, alone: await measure(false), saturated: await measure(true) };
}

/** 60 jobs under 10 per second: the minimum is the time the 51st–60th starts must wait, 5 windows. */
async function rateTrial(ctx: BenchContext, n: number) {
  const dbName = benchDbName('limits_rate');
  const app = await createBenchApp(ctx.uri, dbName, { concurrency: 16, pollIntervalMs: 100 }, [PickupJobs]);
  try {
    const jobs = app.get(JobsService);
    const done = completions(jobs, n);
    const t0 = nowMs();
    await jobs.enqueueMany(Array.from({ length: n }, () => ({ name: 'bench.rate10' })));
    await withTimeout(done.all, TIMEOUT_MS, 'rate limit');
    return { jobs: n, minimumMs: (Math.ceil(n / 10) - 1) * 1000, totalMs: nowMs() - t0 };
  } finally {
    await app.close();
    await dropDatabase(ctx.client.db(dbName));
  }
}

function completions(jobs: JobsService, n: number): { all: Promise<void>; count(): number } {
  let completed = 0;
  let resolveAll!: () => void;
  const all = new Promise<void>((resolve) => {
    resolveAll = resolve;
  });
  const subscription = jobs.events$.subscribe((event) => {
    if (event.type !== 'completed') return;
    completed += 1;
    if (completed === n) {
      subscription.unsubscribe();
      resolveAll();
    }
  });
  return { all, count: () => completed };
}
