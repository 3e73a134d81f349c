import { Injectable } from '@nestjs/common';
import { JobHandler, JobsService } from '../../lib';
import { disableOtelGlobals, type OtelTestSdk, registerOtelTestSdk } from '../support/otel-test-sdk';
import { type BenchContext, benchDbName, createBenchApp, dropDatabase } from './bench-app';
import { type BenchConfig, envInt, fmt, fmtInt, formatTable, log, median, nowMs, withTimeout } from './helpers';

const JOB = 'bench.telemetry';
const TRIAL_TIMEOUT_MS = 180_000;

/**
 * `off`: `telemetry: false`. `noop`: telemetry on with `@opentelemetry/api` loaded but no SDK registered (what an app
 * that installs the API for something else pays). `sdk`: the SDK registered with in-memory exporters (every span
 * recorded, every metric aggregated).
 */
const VARIANTS = ['off', 'noop', 'sdk'] as const;
type TelemetryVariant = (typeof VARIANTS)[number];

export interface TelemetryTrial {
  variant: TelemetryVariant;
  round: number;
  jobs: number;
  /** From the enqueueMany call to the last completion: the producer span and the consumer spans are both in it. */
  totalMs: number;
  jobsPerSecond: number;
  /** This process's CPU (user + system) per job: the client-side cost, where telemetry runs. */
  clientCpuMsPerJob: number;
  spans: number;
}

@Injectable()
class TelemetryBenchJobs {
  @JobHandler(JOB, { maxAttempts: 1 })
  noop(): void {}
}

/**
 * Interleaved rounds `off, noop, sdk`: the same no-op job, enqueued with one `enqueueMany` and run by one worker,
 * per variant. Targets: `noop` within 5 % of `off`, `sdk` within 15 %.
 */
export async function runTelemetry(ctx: BenchContext, config: BenchConfig) {
  const jobs = envInt('BENCH_TELEMETRY_JOBS', config.quick ? 300 : Math.min(config.throughputJobs, 1_000));
  const rounds = envInt('BENCH_TELEMETRY_ROUNDS', config.quick ? 1 : 3);
  const trials: TelemetryTrial[] = [];
  // Warm-up (JIT, pool connections), not measured.
  for (const variant of VARIANTS) await telemetryTrial(ctx, config, variant, 0, Math.min(jobs, 100));
  for (let round = 1; round <= rounds; round += 1) {
    for (const variant of VARIANTS) {
      const trial = await telemetryTrial(ctx, config, variant, round, jobs);
      log(
        `telemetry round ${round}/${rounds} ${variant}: ${fmtInt(trial.jobsPerSecond)} jobs/s (${trial.spans} spans)`,
      );
      trials.push(trial);
    }
  }
  const medianRate = (variant: TelemetryVariant) =>
    median(trials.filter((trial) => trial.variant === variant).map((trial) => trial.jobsPerSecond));
  const off = medianRate('off');
  const rows = VARIANTS.map((variant) => {
    const rate = medianRate(variant);
    const rates = trials.filter((trial) => trial.variant === variant).map((trial) => trial.jobsPerSecond);
    const target = variant === 'noop' ? 0.95 : variant === 'sdk' ? 0.85 : null;
    const ratio = rate / off;
    const cpuMs = median(trials.filter((trial) => trial.variant === variant).map((trial) => trial.clientCpuMsPerJob));
    return [
      variant,
      fmtInt(rate),
      fmt(cpuMs, 3),
      `${fmtInt(Math.min(...rates))}–${fmtInt(Math.max(...rates))}`,
      fmt(ratio * 100, 1),
      target === null ? '' : `≥ ${fmt(target * 100, 0)} %: ${ratio >= target ? 'met' : 'not met'}`,
    ];
  });
  const table = formatTable(
    `Telemetry overhead: ${jobs} no-op jobs, concurrency ${config.throughputConcurrency}, medians of ${rounds} interleaved rounds`,
    ['variant', 'jobs/s', 'client CPU ms/job', 'range', '% of off', 'target'],
    rows,
  );
  return { jobs, rounds, trials, table };
}

async function telemetryTrial(
  ctx: BenchContext,
  config: BenchConfig,
  variant: TelemetryVariant,
  round: number,
  n: number,
): Promise<TelemetryTrial> {
  let sdk: OtelTestSdk | undefined;
  disableOtelGlobals();
  if (variant === 'sdk') sdk = registerOtelTestSdk();
  const dbName = benchDbName('telemetry');
  const app = await createBenchApp(
    ctx.uri,
    dbName,
    { concurrency: config.throughputConcurrency, ...(variant === 'off' && { telemetry: false as const }) },
    [TelemetryBenchJobs],
  );
  try {
    const service = app.get(JobsService);
    let completed = 0;
    let resolveAll!: () => void;
    const allDone = new Promise<void>((resolve) => {
      resolveAll = resolve;
    });
    const subscription = service.events$.subscribe((event) => {
      if (event.type === 'completed' && ++completed === n) resolveAll();
    });
    const items = Array.from({ length: n }, (_, i) => ({ name: JOB, payload: { i } }));
    const t0 = nowMs();
    const cpu0 = process.cpuUsage();
    await service.enqueueMany(items);
    await withTimeout(allDone, TRIAL_TIMEOUT_MS, `telemetry ${variant}`);
    const totalMs = nowMs() - t0;
    const cpu = process.cpuUsage(cpu0);
    subscription.unsubscribe();
    return {
      variant,
      round,
      jobs: n,
      totalMs,
      jobsPerSecond: (n / totalMs) * 1000,
      clientCpuMsPerJob: (cpu.user + cpu.system) / 1000 / n,
      spans: sdk?.spans().length ?? 0,
    };
  } finally {
    await app.close();
    await sdk?.shutdown();
    await dropDatabase(ctx.client.db(dbName));
  }
}
