import { setImmediate as yieldToIo } from 'node:timers/promises';
import { Injectable } from '@nestjs/common';
import { Types } from 'mongoose';
import { type JobExecutionContext, JobHandler, JobsService } from '../../lib';
import { JobLeaseStore } from '../../lib/persistence/job-lease.store';
import { JobReadStore } from '../../lib/persistence/job-read.store';
import { type BenchContext, benchDbName, createBenchApp, dropDatabase } from './bench-app';
import { type BenchConfig, fmtInt, formatTable, log, medianOf, nowMs, withTimeout } from './helpers';

const JOB = 'bench.progress';

export interface ProgressRep {
  calls: number;
  /** First `updateProgress` call → last of their promises settled. */
  elapsedMs: number;
  /** Owner-fenced writes that carried progress (each also a lease renewal). */
  writes: number;
  maxInFlight: number;
  resolved: number;
  rejected: number;
  /** The last value set equals the row's `progress` once every call settled (the job still running). */
  lastValuePersisted: boolean;
  /** …and equals the completed row's `progress`. */
  lastValueOnCompletedRow: boolean;
}

/** Set by the scenario before each job; the handler runs it with its own context. */
let burst: ((ctx: JobExecutionContext) => Promise<void>) | undefined;

@Injectable()
class ProgressProbe {
  @JobHandler(JOB)
  async run(_payload: unknown, ctx: JobExecutionContext): Promise<void> {
    await burst?.(ctx);
  }
}

/**
 * 10,000 `ctx.updateProgress` calls spread over one second inside one handler. Progress rides the lease's pipeline:
 * one write in flight, the calls made meanwhile coalesce into one follow-up carrying the latest value, so writes ≈
 * elapsed / RTT whatever the call rate, and the last value is on the row.
 */
export async function runProgress(ctx: BenchContext, config: BenchConfig) {
  const dbName = benchDbName('progress');
  const app = await createBenchApp(ctx.uri, dbName, { concurrency: 1, pollIntervalMs: 50 }, [ProgressProbe]);
  const reps: ProgressRep[] = [];
  try {
    const jobs = app.get(JobsService);
    const reads = app.get(JobReadStore);
    const meter = meterProgressWrites(app.get(JobLeaseStore));
    for (let rep = 1; rep <= config.repetitions; rep += 1) {
      log(
        `progress rep ${rep}/${config.repetitions}: ${config.heartbeatCalls} calls over ${config.heartbeatSpreadMs} ms`,
      );
      meter.reset();
      let jobId = '';
      const measured = await new Promise<Omit<ProgressRep, 'writes' | 'maxInFlight' | 'lastValueOnCompletedRow'>>(
        (resolve, reject) => {
          burst = async (jobCtx) => {
            jobId = jobCtx.jobId;
            await runBurst(jobCtx, reads, config).then(resolve, reject);
          };
          jobs.enqueue(JOB, {}).catch(reject);
        },
      );
      const { writes, maxInFlight } = meter.read();
      const finished = await withTimeout(jobs.waitUntilFinished(jobId, { timeoutMs: 60_000 }), 60_000, 'progress job');
      reps.push({
        ...measured,
        writes,
        maxInFlight,
        lastValueOnCompletedRow:
          finished.status === 'completed' &&
          (finished.progress as { done?: number } | null)?.done === config.heartbeatCalls,
      });
    }
  } finally {
    burst = undefined;
    await app.close();
    await dropDatabase(ctx.client.db(dbName));
  }
  const yes = (ok: (r: ProgressRep) => boolean) => (reps.every(ok) ? 'yes' : 'NO');
  const table = formatTable(
    `7. Progress: ${fmtInt(config.heartbeatCalls)} ctx.updateProgress calls over ${config.heartbeatSpreadMs} ms in one handler (medians of ${reps.length} reps)`,
    ['metric', 'value', 'target'],
    [
      ['progress writes issued', fmtInt(medianOf(reps, (r) => r.writes)), '≈ elapsed / RTT'],
      ['max writes in flight (worst rep)', String(Math.max(...reps.map((r) => r.maxInFlight))), '1'],
      ['burst elapsed (ms)', fmtInt(medianOf(reps, (r) => r.elapsedMs)), ''],
      [
        'calls resolved / rejected',
        `${fmtInt(medianOf(reps, (r) => r.resolved))} / ${fmtInt(medianOf(reps, (r) => r.rejected))}`,
        'all resolved',
      ],
      ['last value on the row (running)', yes((r) => r.lastValuePersisted), 'yes'],
      ['last value on the completed row', yes((r) => r.lastValueOnCompletedRow), 'yes'],
    ],
  );
  return { config: { calls: config.heartbeatCalls, spreadMs: config.heartbeatSpreadMs }, reps, table };
}

/** Values 1…calls on schedule (calls × elapsed / spread), yielding to I/O between slices so writes land meanwhile. */
async function runBurst(ctx: JobExecutionContext, reads: JobReadStore, config: BenchConfig) {
  let issued = 0;
  let unsettled = 0;
  let resolved = 0;
  let rejected = 0;
  const t0 = nowMs();
  while (issued < config.heartbeatCalls) {
    const due = Math.min(
      config.heartbeatCalls,
      Math.ceil(((nowMs() - t0) / config.heartbeatSpreadMs) * config.heartbeatCalls),
    );
    for (; issued < due; issued += 1) {
      unsettled += 1;
      // A percentage would repeat values; the call's own number makes "the last value" unambiguous.
      ctx.updateProgress({ done: issued + 1 }).then(
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
  const row = await reads.findById(new Types.ObjectId(ctx.jobId));
  const persisted = (row?.progress as { done?: number } | undefined)?.done;
  return {
    calls: issued,
    elapsedMs,
    resolved,
    rejected,
    lastValuePersisted: persisted === config.heartbeatCalls,
  };
}

/** Counts the progress-carrying renewal writes the app's own lease store makes, and how many overlap. */
function meterProgressWrites(leases: JobLeaseStore) {
  const original = leases.renewLease.bind(leases);
  let writes = 0;
  let inFlight = 0;
  let maxInFlight = 0;
  leases.renewLease = async (...args: Parameters<JobLeaseStore['renewLease']>) => {
    const carriesProgress = args[4] !== undefined;
    if (carriesProgress) writes += 1;
    inFlight += 1;
    maxInFlight = Math.max(maxInFlight, inFlight);
    try {
      return await original(...args);
    } finally {
      inFlight -= 1;
    }
  };
  return {
    reset() {
      writes = 0;
      maxInFlight = 0;
    },
    read: () => ({ writes, maxInFlight }),
  };
}
