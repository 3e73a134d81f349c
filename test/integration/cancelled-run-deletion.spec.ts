import { afterEach, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { type JobExecutionContext, JobHandler, type JobsModuleOptions } from '../../lib';
import { createJobsTestApp, type JobsTestApp, waitFor } from '../support/jobs-app';
import { sleep } from '../support/sleep';
import { uniqueDatabaseName } from '../support/test-database';

const LEASE_MS = 1_500;
/** How long the cancelled handler takes to stop once its signal aborts: well inside its settle window (one lease). */
const WIND_DOWN_MS = 300;

/** Each execution of the limited name: when it started, how many others were running then, when it returned. */
const runs: { jobId: string; startedAt: number; othersRunning: number; endedAt?: number }[] = [];

@Injectable()
class LimitedHandlers {
  /** Honours its signal: runs until it aborts, then winds down briefly; a job that is not aborted ends at once. */
  @JobHandler('one.at.a.time', { globalConcurrency: 1 })
  async run(payload: { hold: boolean }, ctx: JobExecutionContext) {
    const othersRunning = runs.filter((other) => other.endedAt === undefined).length;
    const run: (typeof runs)[number] = { jobId: ctx.jobId, startedAt: Date.now(), othersRunning };
    runs.push(run);
    try {
      if (!payload.hold) return;
      await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
      await sleep(WIND_DOWN_MS);
      throw ctx.signal.reason;
    } finally {
      run.endedAt = Date.now();
    }
  }
}

/**
 * Deleting a cancelled row (purge, the retention sweeper, the dashboard's purge, which calls `purge`) must not free
 * its fleet-wide slot while its handler may still run: its owner elsewhere learns of the cancel only at its next
 * renewal, and then has its settle window.
 */
describe('a cancelled run keeps its globalConcurrency slot until its handler can no longer be live', () => {
  const apps: JobsTestApp[] = [];
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()));
    runs.length = 0;
  });

  /** A worker that runs the limited name, and another process (no worker) that cancels and deletes. */
  async function startFleet(label: string, options: JobsModuleOptions = {}) {
    const dbName = uniqueDatabaseName(label);
    const common = { leaseMs: LEASE_MS, pollIntervalMs: 20, ...options };
    const worker = await createJobsTestApp({ dbName, providers: [LimitedHandlers], options: common });
    const admin = await createJobsTestApp({ dbName, options: { ...common, worker: false } });
    apps.push(worker, admin);
    return { worker, admin };
  }

  /** Job 1 runs and holds the name's only slot; job 2 waits for it. */
  async function holdTheSlot(worker: JobsTestApp) {
    const first = await worker.jobs.enqueue('one.at.a.time', { hold: true });
    await waitFor(() => runs.length === 1, 'job 1 to start');
    const second = await worker.jobs.enqueue('one.at.a.time', { hold: false });
    return { first, second };
  }

  /** Job 2 starts only once job 1's handler has returned, and job 1's row was not deleted before its deadline. */
  async function expectNoOverlap(firstId: string) {
    await waitFor(() => runs.length === 2 && runs[1].endedAt !== undefined, 'job 2 to run', 15_000);
    expect(runs[0].jobId).toBe(firstId);
    expect(runs[1].othersRunning).toBe(0);
    expect(runs[1].startedAt).toBeGreaterThanOrEqual(runs[0].endedAt as number);
  }

  it('purge({ status: cancelled }) leaves the row (and its slot) until its lockedUntil has passed', async () => {
    const { worker, admin } = await startFleet('cancel_purge_slot');
    const { first } = await holdTheSlot(worker);
    const cancelled = await admin.jobs.cancel(first.id);
    expect(cancelled?.status).toBe('cancelled');
    const purgedAtOnce = await admin.jobs.purge({ status: 'cancelled' });
    await expectNoOverlap(first.id);
    expect(purgedAtOnce).toBe(0);
    // Once that deadline has passed, the row goes like any cancelled row.
    const lockedUntil = cancelled?.lockedUntil?.getTime() as number;
    let deleted = 0;
    await waitFor(async () => {
      deleted += await admin.jobs.purge({ status: 'cancelled' });
      return deleted === 1;
    }, 'the cancelled row to be purged');
    expect(Date.now()).toBeGreaterThanOrEqual(lockedUntil);
    expect(await admin.jobs.findById(first.id)).toBeNull();
  });

  it('the retention sweeper (cancelled: 1 ms) does not delete the row before its lockedUntil', async () => {
    const retention = { cancelled: 1, sweepIntervalMs: 20 };
    const { worker, admin } = await startFleet('cancel_sweep_slot', { retention });
    const { first } = await holdTheSlot(worker);
    const cancelled = await admin.jobs.cancel(first.id);
    await expectNoOverlap(first.id);
    // The stamp says when the row may go: not before its handler can no longer be live.
    expect(cancelled?.expiresAt?.getTime()).toBeGreaterThanOrEqual(cancelled?.lockedUntil?.getTime() as number);
    await waitFor(async () => (await admin.jobs.findById(first.id)) === null, 'the sweeper to delete the row');
  });
});
