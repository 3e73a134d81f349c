import { setImmediate as yieldToIo } from 'node:timers/promises';
import { Injectable } from '@nestjs/common';
import { Types } from 'mongoose';
import { type JobExecutionContext, JobHandler, JobsService } from '../../lib';
import { JobLeaseStore } from '../../lib/persistence/job-lease.store';
import { type BenchContext, benchDbName, createBenchApp, dropDatabase } from './bench-app';
import {
  type BenchConfig,
  fmt,
  fmtInt,
  forceGc,
  formatTable,
  log,
  mean,
  median,
  medianOf,
  nowMs,
  withTimeout,
} from './helpers';

const JOB = 'bench.heartbeat';

export interface HeartbeatRep {
  calls: number;
  /** First `extendLockTime` call → last of their promises settled. */
  elapsedMs: number;
  writes: number;
  maxInFlight: number;
  /** Duration of the renewal writes themselves (wrapper around `JobLeaseStore.renewLease`), mean and median. */
  renewalRttMs: number;
  renewalRttP50Ms: number;
  /**
   * The design's bound on writes for a burst of this length: elapsed / RTT + 2, with the mean RTT. Writes that never
   * overlap add up to at most the elapsed time, so only overlapping writes (or extra rounds) can break it; the
   * median would overstate the bound, as a few slow writes (GC, a busy server) take much of the time.
   */
  writeBound: number;
  resolved: number;
  rejected: number;
  /** Heap after the burst minus before it, both after a full gc: what the burst left behind. */
  heapGrowthKiB: number | null;
  /** Absolute heap before the burst (after gc): growing across repetitions would mean a leak. */
  heapBeforeKiB: number;
  /**
   * Control: the same time of back-to-back `renewLease` writes awaited directly, no Lease. Its heap growth is what
   * the driver and the connection keep around; the lease's own share is the difference.
   */
  control: { writes: number; heapGrowthKiB: number | null };
}

/** Set by the scenario before each job; the handler runs it with its own context. */
let burst: ((ctx: JobExecutionContext) => Promise<void>) | undefined;

@Injectable()
class HeartbeatProbe {
  @JobHandler(JOB)
  async run(_payload: unknown, ctx: JobExecutionContext): Promise<void> {
    await burst?.(ctx);
  }
}

/**
 * 10,000 `ctx.extendLockTime` calls spread over one second inside one handler. The design promises one renewal
 * write in flight at a time and at most one follow-up per burst, so writes ≈ elapsed / RTT, whatever the call rate.
 */
export async function runHeartbeat(ctx: BenchContext, config: BenchConfig) {
  const dbName = benchDbName('heartbeat');
  const app = await createBenchApp(ctx.uri, dbName, { concurrency: 1, pollIntervalMs: 50 }, [HeartbeatProbe]);
  const reps: HeartbeatRep[] = [];
  try {
    const jobs = app.get(JobsService);
    const meter = meterRenewals(app.get(JobLeaseStore));
    for (let rep = 1; rep <= config.repetitions; rep += 1) {
      log(
        `heartbeat rep ${rep}/${config.repetitions}: ${config.heartbeatCalls} calls over ${config.heartbeatSpreadMs} ms`,
      );
      meter.reset();
      const measured = await runInJob(jobs, (jobCtx) => runBurst(jobCtx, config));
      const lease = { ...measured, ...meter.read(measured.elapsedMs) };
      const control = await runInJob(jobs, (jobCtx) => runDirectWrites(jobCtx, app.get(JobLeaseStore), config));
      reps.push({ ...lease, control });
    }
  } finally {
    burst = undefined;
    await app.close();
    await dropDatabase(ctx.client.db(dbName));
  }
  const table = formatTable(
    `4. Heartbeat: ${fmtInt(config.heartbeatCalls)} ctx.extendLockTime calls over ${config.heartbeatSpreadMs} ms in one handler (medians of ${reps.length} reps)`,
    ['metric', 'value', 'target'],
    [
      ['renewal writes issued', fmtInt(medianOf(reps, (r) => r.writes)), `≤ elapsed / mean RTT + 2`],
      [
        'elapsed / mean RTT + 2 (bound)',
        fmt(
          medianOf(reps, (r) => r.writeBound),
          1,
        ),
        '',
      ],
      ['max writes in flight (worst rep)', String(Math.max(...reps.map((r) => r.maxInFlight))), '1'],
      [
        'renewal write RTT mean (ms)',
        fmt(
          medianOf(reps, (r) => r.renewalRttMs),
          3,
        ),
        '',
      ],
      [
        'renewal write RTT p50 (ms)',
        fmt(
          medianOf(reps, (r) => r.renewalRttP50Ms),
          3,
        ),
        '',
      ],
      ['burst elapsed (ms)', fmtInt(medianOf(reps, (r) => r.elapsedMs)), ''],
      [
        'calls resolved / rejected',
        `${fmtInt(medianOf(reps, (r) => r.resolved))} / ${fmtInt(medianOf(reps, (r) => r.rejected))}`,
        `all resolved`,
      ],
      [
        'heap growth after gc (KiB)',
        fmt(
          medianOf(reps, (r) => r.heapGrowthKiB ?? undefined),
          1,
        ),
        'constant-size state',
      ],
      [
        'control: direct renewLease writes, same time',
        `${fmtInt(medianOf(reps, (r) => r.control.writes))} writes, ${fmt(
          medianOf(reps, (r) => r.control.heapGrowthKiB ?? undefined),
          1,
        )} KiB`,
        'heap growth w/o Lease',
      ],
    ],
  );
  return { config: { calls: config.heartbeatCalls, spreadMs: config.heartbeatSpreadMs }, reps, table };
}

/** Runs `body` inside a job's handler (with its real execution context) and resolves with its result. */
function runInJob<T>(jobs: JobsService, body: (ctx: JobExecutionContext) => Promise<T>): Promise<T> {
  const result = new Promise<T>((resolve, reject) => {
    burst = (jobCtx) => body(jobCtx).then(resolve, reject);
  });
  return jobs.enqueue(JOB, {}).then(() => withTimeout(result, 60_000, 'heartbeat job'));
}

/** Sequential owner-fenced renewals of this job straight through the lease store, for `heartbeatSpreadMs`. */
async function runDirectWrites(ctx: JobExecutionContext, leases: JobLeaseStore, config: BenchConfig) {
  const gcAvailable = forceGc();
  const heapBefore = process.memoryUsage().heapUsed;
  const id = new Types.ObjectId(ctx.jobId);
  const t0 = nowMs();
  let writes = 0;
  while (nowMs() - t0 < config.heartbeatSpreadMs) {
    await leases.renewLease(id, ctx.lockId, new Date(Date.now() + 30_000), new Date());
    writes += 1;
  }
  forceGc();
  const heapAfter = process.memoryUsage().heapUsed;
  return { writes, heapGrowthKiB: gcAvailable ? (heapAfter - heapBefore) / 1024 : null };
}

async function runBurst(ctx: JobExecutionContext, config: BenchConfig) {
  const gcAvailable = forceGc();
  const heapBefore = process.memoryUsage().heapUsed;
  let issued = 0;
  let unsettled = 0;
  let resolved = 0;
  let rejected = 0;
  const t0 = nowMs();
  // Issue calls on schedule (calls × elapsed / spread), yielding to I/O between slices so writes can land meanwhile.
  while (issued < config.heartbeatCalls) {
    const due = Math.min(
      config.heartbeatCalls,
      Math.ceil(((nowMs() - t0) / config.heartbeatSpreadMs) * config.heartbeatCalls),
    );
    for (; issued < due; issued += 1) {
      unsettled += 1;
      ctx.extendLockTime(30_000).then(
        () => {
          unsettled -= 1;
          resolved += 1;
        },
        () => {
          unsettled -= 1;
          rejected += 1;
        },
      );
    }
    await yieldToIo();
  }
  while (unsettled > 0) await yieldToIo();
  const elapsedMs = nowMs() - t0;
  forceGc();
  const heapAfter = process.memoryUsage().heapUsed;
  return {
    calls: issued,
    elapsedMs,
    resolved,
    rejected,
    heapGrowthKiB: gcAvailable ? (heapAfter - heapBefore) / 1024 : null,
    heapBeforeKiB: heapBefore / 1024,
  };
}

/** Wraps the app's own lease store instance: the lease calls `leases.renewLease` for every write it makes. */
function meterRenewals(leases: JobLeaseStore) {
  const original = leases.renewLease.bind(leases);
  let writes = 0;
  let inFlight = 0;
  let maxInFlight = 0;
  let rtts: number[] = [];
  leases.renewLease = async (...args: Parameters<JobLeaseStore['renewLease']>) => {
    writes += 1;
    inFlight += 1;
    maxInFlight = Math.max(maxInFlight, inFlight);
    const start = nowMs();
    try {
      return await original(...args);
    } finally {
      rtts.push(nowMs() - start);
      inFlight -= 1;
    }
  };
  return {
    reset() {
      writes = 0;
      maxInFlight = 0;
      rtts = [];
    },
    read(elapsedMs: number) {
      const renewalRttMs = mean(rtts);
      return {
        writes,
        maxInFlight,
        renewalRttMs,
        renewalRttP50Ms: median(rtts),
        writeBound: elapsedMs / renewalRttMs + 2,
      };
    },
  };
}
