import 'reflect-metadata';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { startTestMongoServer } from '../support/mongo-server';
import { createBenchContext, serverFacts } from './bench-app';
import { runEnqueue } from './enqueue.bench';
import { runHeartbeat } from './heartbeat.bench';
import { fmt, formatTable, log, machineInfo, medianOf, nowMs, readConfig } from './helpers';
import { runLimits } from './limits.bench';
import { runLogs } from './logs.bench';
import { runMetricsNames } from './metrics-names.bench';
import { runPickupLatency } from './pickup-latency.bench';
import { runProgress } from './progress.bench';
import { runQuery } from './query.bench';
import { runQueueDepth } from './queue-depth.bench';
import { runRenewals } from './renewals.bench';
import { runShallowPickup } from './shallow-pickup.bench';
import type { TargetCheck, Verdict } from './spread';
import { runTelemetry } from './telemetry.bench';
import { runThroughput } from './throughput.bench';

/**
 * `npm run bench`: every scenario against one MongoDB server (resolved like the tests: MONGODB_URI, else
 * mongodb-memory-server, else the Java test server), repeated (throughput: interleaved rounds), tables of medians
 * with their ranges, and a JSON file with every repetition's numbers in test/benchmark/results/. Not part of `npm test`: nothing here asserts.
 *
 * Sizes and selection (env): BENCH_QUICK=1 (smoke run), BENCH_REPS, BENCH_ONLY=throughput,enqueue,pickup,shallowPickup,
 * heartbeat,queueDepth,renewals,progress,logs,query,metricsNames,telemetry,limits, BENCH_THROUGHPUT_JOBS, BENCH_THROUGHPUT_ROUNDS (interleaved rounds, default 9, quick 3), BENCH_THROUGHPUT_HISTORY (attempts in each job's history, default 0),
 * BENCH_LIBRARY_OPTIONS (JSON module options for the throughput library trials, e.g. '{"telemetry":false}'),
 * BENCH_AGENDA_ROUNDS (the first rounds also run Agenda, default 2), BENCH_THROUGHPUT_TARGETS (see
 * throughput.bench.ts for the diagnostic variants), BENCH_ENQUEUE_JOBS, BENCH_PICKUP_SAMPLES, BENCH_PICKUP_POLL_MS,
 * BENCH_HEARTBEAT_CALLS (also the progress scenario's calls), BENCH_DEPTH_SMALL / _LARGE / _CLAIMS, BENCH_QUERY_JOBS / _SAMPLES, BENCH_AGENDA_LOCK_LIMIT,
 * BENCH_AGENDA_PROCESS_EVERY_MS, BENCH_RENEWAL_REPS / _CONCURRENCY / _LEASE_MS / _WINDOW_MS / _SHORT_JOBS /
 * _SHORT_JOB_MS (see renewals.bench.ts), BENCH_TELEMETRY_JOBS / _ROUNDS (see telemetry.bench.ts), BENCH_LIMITS_JOBS / _ROUNDS
 * (see limits.bench.ts), BENCH_METRICS_NAMES / _SAMPLES (see metrics-names.bench.ts).
 *
 * Profiling the library's throughput (after one `npm run bench` compiled it):
 *   BENCH_ONLY=throughput BENCH_THROUGHPUT_TARGETS=library node --cpu-prof \
 *     --cpu-prof-dir=test/benchmark/results/profiles .cache/benchmark/test/benchmark/run.js
 *   node .cache/benchmark/test/benchmark/profile-summary.js test/benchmark/results/profiles/<file>.cpuprofile
 * That profile holds start-up and the enqueue too; BENCH_PROFILE_DIR=<dir> instead profiles each throughput trial's
 * measured window alone (one file per system and round; BENCH_PROFILE_KIND=heap: bytes allocated, by site; =survivors: those that outlived a minor GC; =retained: those alive at the end), see
 * window-profile.ts.
 */

const RESULTS_DIR = resolve('test', 'benchmark', 'results');

type Scenarios = {
  throughput?: Awaited<ReturnType<typeof runThroughput>>;
  enqueue?: Awaited<ReturnType<typeof runEnqueue>>;
  pickup?: Awaited<ReturnType<typeof runPickupLatency>>;
  shallowPickup?: Awaited<ReturnType<typeof runShallowPickup>>;
  heartbeat?: Awaited<ReturnType<typeof runHeartbeat>>;
  queueDepth?: Awaited<ReturnType<typeof runQueueDepth>>;
  renewals?: Awaited<ReturnType<typeof runRenewals>>;
  progress?: Awaited<ReturnType<typeof runProgress>>;
  logs?: Awaited<ReturnType<typeof runLogs>>;
  query?: Awaited<ReturnType<typeof runQuery>>;
  metricsNames?: Awaited<ReturnType<typeof runMetricsNames>>;
  telemetry?: Awaited<ReturnType<typeof runTelemetry>>;
  limits?: Awaited<ReturnType<typeof runLimits>>;
};

async function main(): Promise<void> {
  const started = nowMs();
  const machine = machineInfo();
  log(`machine: ${machine.cpuModel} × ${machine.cores}, node ${machine.node}, load ${machine.loadAverageAtStart}`);
  if (!(globalThis as { gc?: unknown }).gc) log('run with --expose-gc for heap numbers (npm run bench does)');
  const server = await startTestMongoServer((line) => log(`[mongo] ${line}`));
  log(`[mongo] using ${server.description}`);
  const config = readConfig(server.kind);
  log(`sizes: ${JSON.stringify(config)}`);
  const ctx = await createBenchContext(server.uri);
  const scenarios: Scenarios = {};
  const errors: Record<string, string> = {};
  let facts: Record<string, unknown> = {};
  try {
    facts = await serverFacts(ctx.client);
    // The Java server's pid is in its description; its CPU time splits the cost between client and server.
    const serverPid = Number(/pid (\d+)/.exec(server.description)?.[1]) || null;
    const wanted = (name: string) => !config.only || config.only.includes(name);
    const attempt = async <K extends keyof Scenarios>(name: K, run: () => Promise<NonNullable<Scenarios[K]>>) => {
      if (!wanted(name)) return;
      try {
        scenarios[name] = await run();
        console.log(scenarios[name]?.table);
      } catch (error) {
        errors[name] = error instanceof Error ? (error.stack ?? error.message) : String(error);
        log(`scenario ${name} failed: ${errors[name]}`);
      }
    };
    await attempt('throughput', () => runThroughput(ctx, config, serverPid));
    await attempt('enqueue', () => runEnqueue(ctx, config));
    await attempt('pickup', () => runPickupLatency(ctx, config));
    await attempt('shallowPickup', () => runShallowPickup(ctx, config));
    await attempt('heartbeat', () => runHeartbeat(ctx, config));
    await attempt('queueDepth', () => runQueueDepth(ctx, config));
    await attempt('renewals', () => runRenewals(ctx, config, serverPid));
    await attempt('progress', () => runProgress(ctx, config));
    await attempt('logs', () => runLogs(ctx, config));
    await attempt('query', () => runQuery(ctx, config));
    await attempt('metricsNames', () => runMetricsNames(ctx, config));
    await attempt('telemetry', () => runTelemetry(ctx, config));
    await attempt('limits', () => runLimits(ctx, config));
  } finally {
    await ctx.client.close();
    await server.stop();
  }

  const targets = targetTable(scenarios);
  const durationS = (nowMs() - started) / 1000;
  console.log(`\n==== nestjs-mongo-jobs benchmark: ${server.kind} ${facts.version ?? ''}, ${fmt(durationS, 0)} s ====`);
  for (const scenario of Object.values(scenarios)) console.log(scenario.table);
  console.log(targets.table);
  console.log(
    `\nNoise: ${machine.cores} cores shared by the client, the server${server.kind === 'MONGODB_URI' ? '' : ' (same machine)'} and anything else running (load at start ${machine.loadAverageAtStart}).`,
  );

  mkdirSync(RESULTS_DIR, { recursive: true });
  const file = join(RESULTS_DIR, `bench-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  const output = {
    startedAt: new Date(Date.now() - durationS * 1000).toISOString(),
    durationS,
    machine,
    server: { kind: server.kind, description: server.description, ...facts },
    config,
    targets: targets.checks,
    errors,
    // Tables are for the console; the JSON keeps every repetition's numbers.
    scenarios: Object.fromEntries(Object.entries(scenarios).map(([k, v]) => [k, { ...v, table: undefined }])),
  };
  writeFileSync(file, `${JSON.stringify(output, null, 2)}\n`);
  log(`results written to ${relative(process.cwd(), file)}`);
  if (Object.keys(errors).length > 0) process.exitCode = 1;
}

/** The targets are reported, never asserted: numbers on a shared 2-core machine are too noisy to gate on. */
function targetTable(s: Scenarios) {
  const checks: TargetCheck[] = [...(s.throughput?.targets ?? []), ...(s.renewals?.targets ?? [])];
  const plain = (met: boolean): Verdict => (met ? 'met' : 'not met');
  if (s.heartbeat) {
    const reps = s.heartbeat.reps;
    const maxInFlight = Math.max(...reps.map((r) => r.maxInFlight));
    checks.push({
      target: 'heartbeat: at most 1 renewal write in flight',
      measured: String(maxInFlight),
      verdict: plain(maxInFlight <= 1),
    });
    const worst = reps.reduce((a, b) => (b.writes - b.writeBound > a.writes - a.writeBound ? b : a));
    checks.push({
      target: 'heartbeat: writes ≤ elapsed / mean RTT + 2',
      measured: `${worst.writes} ≤ ${fmt(worst.writeBound, 1)} (worst rep)`,
      verdict: plain(reps.every((r) => r.writes <= r.writeBound)),
    });
  }
  if (s.progress) {
    const reps = s.progress.reps;
    const maxInFlight = Math.max(...reps.map((r) => r.maxInFlight));
    checks.push({
      target: 'progress: at most 1 write in flight',
      measured: String(maxInFlight),
      verdict: plain(maxInFlight <= 1),
    });
    checks.push({
      target: 'progress: the last value is on the row (running, then completed)',
      measured: reps.every((r) => r.lastValuePersisted && r.lastValueOnCompletedRow) ? 'yes' : 'no',
      verdict: plain(reps.every((r) => r.lastValuePersisted && r.lastValueOnCompletedRow)),
    });
  }
  if (s.pickup) {
    const p50 = medianOf(s.pickup.local.reps, (r) => r.p50Ms);
    checks.push({ target: 'in-process pickup p50 ≤ 20 ms', measured: `${fmt(p50, 2)} ms`, verdict: plain(p50 <= 20) });
  }
  const table = formatTable(
    'Targets (reported, not asserted; "inside the spread": the bound lies between the best and worst round)',
    ['target', 'measured', 'verdict'],
    checks.map((c) => [c.target, c.measured, c.verdict]),
  );
  return { checks, table };
}

main()
  .catch((error) => {
    console.error(error);
    process.exitCode = 1;
  })
  // Agenda or a driver may leave a timer behind; the results are written by now, so end here.
  .finally(() => setTimeout(() => process.exit(), 100).unref());
