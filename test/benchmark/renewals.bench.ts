import { setTimeout as sleepAbortable } from 'node:timers/promises';
import { Injectable } from '@nestjs/common';
import { getConnectionToken } from '@nestjs/mongoose';
import type { MongoClient } from 'mongodb';
import type { Connection } from 'mongoose';
import { type JobExecutionContext, JobHandler, JobsService } from '../../lib';
import { DEFAULT_JOBS_OPTIONS } from '../../lib/model/jobs.constants';
import { type BenchContext, benchDbName, createBenchApp, dropDatabase } from './bench-app';
import { CpuMeter } from './cpu-meter';
import { type BenchConfig, fmt, fmtInt, formatTable, log, nowMs, sleep, withTimeout } from './helpers';
import { RenewalCounter, type RenewalTally, totalTraffic } from './renewal-counter';
import { fmtSpread, judge, type Spread, spreadOf, type TargetCheck } from './spread';

const HOLD_JOB = 'bench.renewal.hold';
const SHORT_JOB = 'bench.renewal.short';
/** The library's default poll interval: the worker is idle-polling at this pace when the burst arrives. */
const POLL_INTERVAL_MS = 1_000;
const PHASE_TIMEOUT_MS = 30_000;
/** How often the short-jobs phase counts completed rows (only matters when a completion emitted no event). */
const POLL_DONE_MS = 500;

/** Handler entries and exits of the long jobs, so the scenario knows when every slot runs and when all left. */
class HoldGate {
  readonly enteredAt: number[] = [];
  left = 0;
  /** Handlers whose signal aborted (lease lost or shutdown) before the release. */
  aborted = 0;
  private releaseAll!: () => void;
  readonly released = new Promise<void>((resolve) => {
    this.releaseAll = resolve;
  });
  private onEntered: Array<{ count: number; resolve: () => void }> = [];
  private onLeft: Array<{ count: number; resolve: () => void }> = [];

  get running(): number {
    return this.enteredAt.length - this.left;
  }

  enter(): void {
    this.enteredAt.push(nowMs());
    this.onEntered = settle(this.onEntered, this.enteredAt.length);
  }

  leave(): void {
    this.left += 1;
    this.onLeft = settle(this.onLeft, this.left);
  }

  release(): void {
    this.releaseAll();
  }

  entered(count: number): Promise<void> {
    return waitCount(this.onEntered, this.enteredAt.length, count);
  }

  allLeft(count: number): Promise<void> {
    return waitCount(this.onLeft, this.left, count);
  }
}

function waitCount(waiters: Array<{ count: number; resolve: () => void }>, now: number, count: number) {
  if (now >= count) return Promise.resolve();
  return new Promise<void>((resolve) => waiters.push({ count, resolve }));
}

function settle(waiters: Array<{ count: number; resolve: () => void }>, now: number) {
  for (const w of waiters) if (now >= w.count) w.resolve();
  return waiters.filter((w) => now < w.count);
}

/** Set by the scenario before each phase. */
let gate: HoldGate | undefined;
let shortJobMs = 2_000;

@Injectable()
class RenewalJobs {
  /** Runs until the scenario releases it (its lease renewed meanwhile), or until its signal aborts. */
  @JobHandler(HOLD_JOB)
  async hold(_payload: unknown, ctx: JobExecutionContext): Promise<void> {
    const current = gate;
    if (!current) return;
    current.enter();
    try {
      await Promise.race([current.released, aborted(ctx.signal)]);
    } catch (error) {
      current.aborted += 1;
      throw error;
    } finally {
      current.leave();
    }
  }

  @JobHandler(SHORT_JOB)
  async short(_payload: unknown, ctx: JobExecutionContext): Promise<void> {
    await sleepAbortable(shortJobMs, undefined, { signal: ctx.signal });
  }
}

function aborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    if (signal.aborted) reject(signal.reason);
    else signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
}

export interface RenewalRep {
  /** `enqueueMany` of `concurrency` due jobs (worker idle-polling) → the last of them running, and → 90 % running. */
  fillMs: number;
  fill90Ms: number;
  /** How long the `enqueueMany` call itself took (part of the fill time). */
  enqueueMs: number;
  windowMs: number;
  /** Running jobs × seconds inside the window (all slots, unless a lease was lost). */
  runningJobSeconds: number;
  tally: RenewalTally;
  /** Per running job per second, in the window. */
  renewalRoundTrips: number;
  renewalStatements: number;
  renewalLeases: number;
  /** Renewal round trips / every command sent in the window. */
  renewalShareOfCommands: number;
  clientCpuMs: number;
  serverCpuMs: number | null;
  lostLeases: number;
  /** `shortJobs` jobs of `shortJobMs` each: enqueue start → all completed. */
  shortRunMs: number;
  shortJobsPerSecond: number;
  /** Jobs/s over the ideal `concurrency / shortJobMs`. */
  shortRatioToIdeal: number;
  /** Short jobs `completed` in the database without a `completed` event (their lease was given up meanwhile). */
  completedWithoutEvent: number;
  /** `stale` events of short jobs (lease lost while running). */
  staleEvents: number;
}

/**
 * Concurrency 500 (BENCH_RENEWAL_CONCURRENCY) in one worker process, leaseMs 3 s (so a heartbeat every second):
 * (1) fill time: the 500 jobs become due at once (`enqueueMany`, worker idle-polling) → all 500 running;
 * (2) steady state: all 500 running and renewing; renewal round trips (and statements, and leases addressed) per
 *     running job per second, counted by command monitoring on the jobs collection, and client/server CPU per
 *     running job per second;
 * (3) 2 s jobs (2 × concurrency of them) against the ideal throughput `concurrency / 2 s`.
 */
export async function runRenewals(ctx: BenchContext, config: BenchConfig, serverPid: number | null) {
  const rc = config.renewal;
  const reps: RenewalRep[] = [];
  for (let rep = 1; rep <= rc.repetitions; rep += 1) {
    log(`renewals rep ${rep}/${rc.repetitions}: concurrency ${rc.concurrency}, leaseMs ${rc.leaseMs}`);
    const result = await renewalRep(ctx, config, serverPid);
    reps.push(result);
    log(
      `  fill ${fmtInt(result.fillMs)} ms, ${fmt(result.renewalRoundTrips, 3)} renewal round trips and ` +
        `${fmt(result.clientCpuMs / result.runningJobSeconds, 3)} client CPU ms per running job per s, ` +
        `2 s jobs at ${fmt(result.shortRatioToIdeal * 100, 0)} % of ideal`,
    );
  }
  return summarize(reps, config);
}

async function renewalRep(ctx: BenchContext, config: BenchConfig, serverPid: number | null): Promise<RenewalRep> {
  const rc = config.renewal;
  const heartbeatMs = rc.leaseMs / 3;
  const dbName = benchDbName('renewals');
  const app = await createBenchApp(
    ctx.uri,
    dbName,
    { concurrency: rc.concurrency, leaseMs: rc.leaseMs, pollIntervalMs: POLL_INTERVAL_MS },
    [RenewalJobs],
    { monitorCommands: true },
  );
  const current = new HoldGate();
  gate = current;
  shortJobMs = rc.shortJobMs;
  const rows = ctx.client.db(dbName).collection(DEFAULT_JOBS_OPTIONS.collectionName);
  try {
    const jobs = app.get(JobsService);
    const client = app.get<Connection>(getConnectionToken()).getClient() as unknown as MongoClient;
    const counter = new RenewalCounter(client, DEFAULT_JOBS_OPTIONS.collectionName);
    // Let the worker find nothing at least once: it is idle-polling when the burst arrives.
    await sleep(Math.min(POLL_INTERVAL_MS, 300));

    // (1) Fill: every job due at once.
    const t0 = nowMs();
    await jobs.enqueueMany(Array.from({ length: rc.concurrency }, (_, i) => ({ name: HOLD_JOB, payload: { i } })));
    const enqueueMs = nowMs() - t0;
    await withTimeout(current.entered(rc.concurrency), PHASE_TIMEOUT_MS, 'filling every slot');
    const fillMs = current.enteredAt[rc.concurrency - 1] - t0;
    const fill90Ms = current.enteredAt[Math.ceil(rc.concurrency * 0.9) - 1] - t0;

    // (2) Steady state, once the last lease has had its first heartbeat interval.
    await sleep(heartbeatMs);
    const cpu = new CpuMeter(serverPid);
    const runningBefore = current.running;
    const abortedBefore = current.aborted;
    counter.start();
    cpu.start();
    const w0 = nowMs();
    await sleep(rc.windowMs);
    const used = cpu.stop();
    const tally = counter.stop();
    const windowMs = nowMs() - w0;
    const runningJobSeconds = ((runningBefore + current.running) / 2) * (windowMs / 1000);
    const lostLeases = current.aborted - abortedBefore;
    current.release();
    await withTimeout(current.allLeft(rc.concurrency), PHASE_TIMEOUT_MS, 'releasing the long jobs');
    await withTimeout(drained(rows), PHASE_TIMEOUT_MS, 'completing the long jobs');

    // (3) 2 s jobs, more than the slots. Done when every one is `completed` in the database: the `completed`
    // events give the exact moment; a completion whose write landed after its lease was given up emits none, so the
    // collection is counted too (every POLL_DONE_MS), and such completions are reported.
    let events = 0;
    let staleEvents = 0;
    const subscription = jobs.events$.subscribe((event) => {
      if (event.name !== SHORT_JOB) return;
      if (event.type === 'completed') events += 1;
      if (event.type === 'stale') staleEvents += 1;
    });
    const s0 = nowMs();
    let shortRunMs: number;
    let completedRows = 0;
    try {
      await jobs.enqueueMany(Array.from({ length: rc.shortJobs }, (_, i) => ({ name: SHORT_JOB, payload: { i } })));
      // Generous: twice the ideal time, plus a phase's margin.
      const deadline = s0 + PHASE_TIMEOUT_MS + 2 * Math.ceil(rc.shortJobs / rc.concurrency) * rc.shortJobMs;
      let lastCount = nowMs();
      while (events < rc.shortJobs) {
        if (nowMs() > deadline) {
          throw new Error(`short jobs timed out (${events} completed events; rows: ${await statusCounts(rows)})`);
        }
        if (nowMs() - lastCount >= POLL_DONE_MS) {
          completedRows = await rows.countDocuments({ name: SHORT_JOB, status: 'completed' });
          lastCount = nowMs();
          if (completedRows === rc.shortJobs) break;
        }
        await sleep(5);
      }
      shortRunMs = nowMs() - s0;
    } finally {
      subscription.unsubscribe();
    }
    const completedWithoutEvent = Math.max(0, completedRows - events);
    const shortJobsPerSecond = (rc.shortJobs / shortRunMs) * 1000;

    const total = totalTraffic(tally);
    const allCommands = Object.values(tally.allCommands).reduce((a, b) => a + b, 0);
    return {
      fillMs,
      fill90Ms,
      enqueueMs,
      windowMs,
      runningJobSeconds,
      tally,
      renewalRoundTrips: total.roundTrips / runningJobSeconds,
      renewalStatements: total.statements / runningJobSeconds,
      renewalLeases: total.leases / runningJobSeconds,
      renewalShareOfCommands: allCommands > 0 ? total.roundTrips / allCommands : Number.NaN,
      clientCpuMs: used.clientMs,
      serverCpuMs: used.serverMs,
      lostLeases,
      shortRunMs,
      shortJobsPerSecond,
      completedWithoutEvent,
      staleEvents,
      shortRatioToIdeal: shortJobsPerSecond / (rc.concurrency / (rc.shortJobMs / 1000)),
    };
  } finally {
    current.release();
    gate = undefined;
    await app.close();
    await dropDatabase(ctx.client.db(dbName));
  }
}

async function statusCounts(rows: { aggregate(pipeline: object[]): { toArray(): Promise<unknown[]> } }) {
  const counts = await rows.aggregate([{ $group: { _id: '$status', n: { $sum: 1 } } }]).toArray();
  return JSON.stringify(counts);
}

/** Resolves once no row is `running`: every completion write has landed. */
async function drained(rows: { countDocuments(filter: object): Promise<number> }): Promise<void> {
  while ((await rows.countDocuments({ status: 'running' })) > 0) await sleep(50);
}

function summarize(reps: RenewalRep[], config: BenchConfig) {
  const rc = config.renewal;
  const heartbeatS = rc.leaseMs / 3 / 1000;
  const of = (pick: (r: RenewalRep) => number | null) => spreadOf(reps.map(pick));
  const perJobSecond = (pick: (r: RenewalRep) => number | null) =>
    of((r) => {
      const v = pick(r);
      return v === null ? null : v / r.runningJobSeconds;
    });
  const fill = of((r) => r.fillMs);
  const roundTrips = of((r) => r.renewalRoundTrips);
  const perTick: Spread = {
    median: roundTrips.median * heartbeatS,
    min: roundTrips.min * heartbeatS,
    max: roundTrips.max * heartbeatS,
    n: roundTrips.n,
  };
  const byCommand = (name: string) => of((r) => (r.tally.renewals[name]?.roundTrips ?? 0) / r.runningJobSeconds);
  const summary = {
    fillMs: fill,
    fill90Ms: of((r) => r.fill90Ms),
    enqueueMs: of((r) => r.enqueueMs),
    renewalRoundTripsPerJobSecond: roundTrips,
    renewalRoundTripsPerJobTick: perTick,
    renewalStatementsPerJobSecond: of((r) => r.renewalStatements),
    renewalLeasesPerJobSecond: of((r) => r.renewalLeases),
    renewalShareOfCommands: of((r) => r.renewalShareOfCommands),
    clientCpuMsPerJobSecond: perJobSecond((r) => r.clientCpuMs),
    serverCpuMsPerJobSecond: perJobSecond((r) => r.serverCpuMs),
    shortJobsPerSecond: of((r) => r.shortJobsPerSecond),
    shortRatioToIdeal: of((r) => r.shortRatioToIdeal),
  };
  const commandNames = [...new Set(reps.flatMap((r) => Object.keys(r.tally.renewals)))].sort();
  const targets: TargetCheck[] = [
    {
      target: `renewals: all ${rc.concurrency} slots running ≤ 1 s after the work is due`,
      measured: `${fmtSpread(fill, 0)} ms`,
      verdict: judge({ op: '≤', value: 1000 }, fill.median, fill),
    },
    {
      // The issue asks for "well below one per heartbeat tick"; a tenth of one is how this bench reads "well below".
      target: `renewals: round trips per running job per heartbeat tick well below 1 (≤ 0.1)`,
      measured: fmtSpread(perTick, 3),
      verdict: judge({ op: '≤', value: 0.1 }, perTick.median, perTick),
    },
  ];
  const idealJobsPerSecond = rc.concurrency / (rc.shortJobMs / 1000);
  const table = formatTable(
    `6. Renewals: concurrency ${rc.concurrency} in one worker, leaseMs ${rc.leaseMs} (heartbeat ${fmtInt(rc.leaseMs / 3)} ms), ` +
      `${fmtInt(rc.windowMs)} ms steady-state window, median (min–max) of ${reps.length} rep(s)`,
    ['metric', 'value'],
    [
      [`fill: enqueueMany of ${rc.concurrency} due jobs → all running (ms)`, fmtSpread(fill, 0)],
      ['fill: → 90 % running (ms)', fmtSpread(summary.fill90Ms, 0)],
      ['  of which the enqueueMany call (ms)', fmtSpread(summary.enqueueMs, 0)],
      ['renewal round trips per running job per s', fmtSpread(roundTrips, 3)],
      ...commandNames.map((name) => [`  ${name} commands per running job per s`, fmtSpread(byCommand(name), 3)]),
      ['renewal round trips per running job per heartbeat tick', fmtSpread(perTick, 3)],
      ['renewal statements per running job per s', fmtSpread(summary.renewalStatementsPerJobSecond, 3)],
      ['leases renewed (addressed) per running job per s', fmtSpread(summary.renewalLeasesPerJobSecond, 3)],
      ['renewal round trips / all commands in the window', fmtSpread(summary.renewalShareOfCommands, 2)],
      ['client CPU ms per running job per s', fmtSpread(summary.clientCpuMsPerJobSecond, 3)],
      ['server CPU ms per running job per s', fmtSpread(summary.serverCpuMsPerJobSecond, 3)],
      ['leases lost in the window (all reps)', String(reps.reduce((a, r) => a + r.lostLeases, 0))],
      [`${rc.shortJobs} jobs of ${fmtInt(rc.shortJobMs)} ms: jobs/s`, fmtSpread(summary.shortJobsPerSecond, 0)],
      [
        `  vs ideal ${fmtInt(idealJobsPerSecond)} jobs/s (concurrency / job time)`,
        fmtSpread(summary.shortRatioToIdeal, 2),
      ],
      [
        '  stale events / completed rows without a completed event (all reps)',
        `${reps.reduce((a, r) => a + r.staleEvents, 0)} / ${reps.reduce((a, r) => a + r.completedWithoutEvent, 0)}`,
      ],
    ],
  );
  return { config: rc, reps, summary, targets, table };
}
