import { afterEach, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { type JobExecutionContext, JobHandler } from '../../lib';
import { createJobsTestApp, type JobsTestApp, waitFor } from '../support/jobs-app';
import { sleep } from '../support/sleep';
import { uniqueDatabaseName } from '../support/test-database';

/** The 3 s lease scaled down; every figure below is a fraction of it, so the test means the same. */
const LEASE_MS = 1_500;
/** The cancelled handler honours its signal but takes 85% of its lease to stop: inside its settle window. */
const WIND_DOWN_MS = Math.round(LEASE_MS * 0.85);

/** Each execution: when it started, how many executions of the job were running then, when it returned. */
const runs: { lockId: string; startedAt: number; othersRunning: number; endedAt?: number }[] = [];

async function settleLate(_payload: unknown, ctx: JobExecutionContext) {
  const othersRunning = runs.filter((other) => other.endedAt === undefined).length;
  const run: (typeof runs)[number] = { lockId: ctx.lockId, startedAt: Date.now(), othersRunning };
  runs.push(run);
  try {
    if (runs.length > 1) return; // the retried run ends at once
    await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
    await sleep(WIND_DOWN_MS);
    throw ctx.signal.reason;
  } finally {
    run.endedAt = Date.now();
  }
}

@Injectable()
class LateSettlingHandlers {
  /** One execution per process at a time: the retried run cannot start beside the old one in the owner process. */
  @JobHandler('settle.late.one.per.process', { concurrency: 1 })
  onePerProcess(payload: unknown, ctx: JobExecutionContext) {
    return settleLate(payload, ctx);
  }

  @JobHandler('settle.late')
  any(payload: unknown, ctx: JobExecutionContext) {
    return settleLate(payload, ctx);
  }
}

/**
 * Cancel then retry of a running job whose handler honours its signal but settles late (inside the settle window
 * the library gives an aborted handler): the retried run must not start while the old handler is still running.
 */
describe('cancel then retry never runs a job twice at once', () => {
  const apps: JobsTestApp[] = [];
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()));
    runs.length = 0;
  });

  const start = async (dbName: string, workerId: string) => {
    const app = await createJobsTestApp({
      dbName,
      options: { leaseMs: LEASE_MS, pollIntervalMs: 20, workerId },
      providers: [LateSettlingHandlers],
    });
    apps.push(app);
    return app;
  };

  /** The retried run started only after the cancelled handler had returned. */
  async function expectRunsInTurn(app: JobsTestApp, id: string) {
    await waitFor(async () => (await app.jobs.findById(id))?.status === 'completed', 'the retried run', 15_000);
    expect(runs).toHaveLength(2);
    expect(runs[1].othersRunning).toBe(0);
    expect(runs[1].startedAt).toBeGreaterThanOrEqual(runs[0].endedAt as number);
  }

  it('on another worker: cancel and retry from a process that does not own the run', async () => {
    const dbName = uniqueDatabaseName('cancel_retry_late_remote');
    const a = await start(dbName, 'A');
    const b = await start(dbName, 'B');
    const job = await a.jobs.enqueue('settle.late.one.per.process', null);
    await waitFor(() => runs.length === 1, 'the first run');
    const other = runs[0].lockId.startsWith('A') ? b : a;
    await other.jobs.cancel(job.id);
    const retried = await other.jobs.retry(job.id);
    expect(retried?.status).toBe('pending');
    // While the old handler runs, the owner's one slot for the name is busy: only the other worker could take it.
    await expectRunsInTurn(other, job.id);
  });

  it('on the same worker: cancel and retry from the owner process, just before its next renewal', async () => {
    const app = await start(uniqueDatabaseName('cancel_retry_late_local'), 'A');
    const job = await app.jobs.enqueue('settle.late', null);
    await waitFor(() => runs.length === 1, 'the first run');
    // Cancel late in a heartbeat period, when the deadline the run holds is closest: less than the wind-down away.
    await waitFor(async () => {
      const lockedUntil = (await app.jobs.findById(job.id))?.lockedUntil;
      return lockedUntil !== null && lockedUntil !== undefined && lockedUntil.getTime() - Date.now() < LEASE_MS * 0.75;
    }, 'the lease to be a quarter spent');
    await app.jobs.cancel(job.id);
    await app.jobs.retry(job.id);
    await expectRunsInTurn(app, job.id);
  });
});
