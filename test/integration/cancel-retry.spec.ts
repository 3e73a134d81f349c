import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { type JobExecutionContext, JobHandler } from '../../lib';
import { createJobsTestApp, type JobsTestApp, waitFor } from '../support/jobs-app';
import { uniqueDatabaseName } from '../support/test-database';

const LEASE_MS = 1500;

interface Start {
  lockId: string;
  at: number;
  abortedWith?: unknown;
}
const starts: Start[] = [];

@Injectable()
class HoldingHandlers {
  /** The first run holds until its signal aborts (then settles as told); later runs finish at once. */
  @JobHandler('hold')
  async hold(_payload: unknown, ctx: JobExecutionContext) {
    const start: Start = { lockId: ctx.lockId, at: Date.now() };
    starts.push(start);
    if (starts.length > 1) return;
    await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
    start.abortedWith = ctx.signal.reason;
    throw ctx.signal.reason;
  }
}

describe('cancel then retry of a running job', () => {
  const dbName = uniqueDatabaseName('cancel_retry');
  const options = { leaseMs: LEASE_MS, pollIntervalMs: 50 };
  let a: JobsTestApp;
  let b: JobsTestApp;

  beforeAll(async () => {
    a = await createJobsTestApp({ dbName, options: { ...options, workerId: 'A' }, providers: [HoldingHandlers] });
    b = await createJobsTestApp({ dbName, options: { ...options, workerId: 'B' }, providers: [HoldingHandlers] });
  });
  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
  });

  it('gives the job no new owner before the old owner lease runs out, across processes', async () => {
    starts.length = 0;
    const job = await a.jobs.enqueue('hold', null);
    await waitFor(() => starts.length === 1, 'first start');
    const owner = starts[0].lockId.startsWith('A') ? a : b;
    const other = owner === a ? b : a;
    // Deadlines only move forward: the lease the owner holds at cancel time ends no earlier than this.
    const deadline = (await other.jobs.findById(job.id))?.lockedUntil as Date;
    const cancelled = await other.jobs.cancel(job.id);
    const retried = await other.jobs.retry(job.id);

    await waitFor(async () => (await a.jobs.findById(job.id))?.status === 'completed', 'the retried run');
    expect(starts).toHaveLength(2);
    expect(starts[1].at).toBeGreaterThanOrEqual(deadline.getTime());
    // Cancel keeps the old owner's last deadline; retry makes the job due no earlier.
    expect(cancelled?.lockedUntil?.getTime()).toBeGreaterThanOrEqual(deadline.getTime());
    expect(retried).toMatchObject({ status: 'pending', runAt: cancelled?.lockedUntil });
    // The job was retried before the remote owner's next renewal: that renewal finds it pending, not cancelled, and
    // cannot tell the cancel from a takeover (a renewal that finds the row cancelled aborts with JobCancelledError).
    expect(starts[0].abortedWith).toMatchObject({ name: 'LeaseLostError', reason: 'taken-over' });
  });

  it('does the same when cancel and retry run in the owner process', async () => {
    starts.length = 0;
    const job = await a.jobs.enqueue('hold', null);
    await waitFor(() => starts.length === 1, 'first start');
    const owner = starts[0].lockId.startsWith('A') ? a : b;
    const deadline = (await owner.jobs.findById(job.id))?.lockedUntil as Date;
    await owner.jobs.cancel(job.id);
    await owner.jobs.retry(job.id);
    await waitFor(async () => (await a.jobs.findById(job.id))?.status === 'completed', 'the retried run');
    expect(starts[1].at).toBeGreaterThanOrEqual(deadline.getTime());
    expect(starts[0].abortedWith).toMatchObject({ name: 'JobCancelledError' });
  });

  it('runNow does not start the retried job before the old owner lease runs out', async () => {
    starts.length = 0;
    const job = await a.jobs.enqueue('hold', null);
    await waitFor(() => starts.length === 1, 'first start');
    const owner = starts[0].lockId.startsWith('A') ? a : b;
    const other = owner === a ? b : a;
    await other.jobs.cancel(job.id);
    const retried = await other.jobs.retry(job.id);
    for (const app of [other, owner]) {
      expect(await app.jobs.runNow(job.id)).toMatchObject({
        kind: 'conflict',
        reason: 'not_due',
        job: { status: 'pending', runAt: retried?.runAt },
      });
    }
    expect(starts).toHaveLength(1);
    await waitFor(async () => (await a.jobs.findById(job.id))?.status === 'completed', 'the retried run');
  });
});
