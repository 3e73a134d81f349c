import { afterEach, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { Types } from 'mongoose';
import { type JobExecutionContext, JobHandler } from '../../lib';
import { JobClaimService } from '../../lib/claim/job-claim.service';
import { JobRunner } from '../../lib/worker/job-runner.service';
import { createJobsTestApp, type JobsTestApp, waitFor } from '../support/jobs-app';
import { sleep } from '../support/sleep';
import { uniqueDatabaseName } from '../support/test-database';

const runs: { jobId: string; worker: string; attempt: number }[] = [];

@Injectable()
class CountingHandlers {
  @JobHandler('count')
  async count(_payload: unknown, ctx: JobExecutionContext) {
    runs.push({ jobId: ctx.jobId, worker: ctx.lockId.split('#')[0], attempt: ctx.attempt });
    await sleep(Math.random() * 5);
  }
}

describe('several workers on one database', () => {
  const apps: JobsTestApp[] = [];
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()));
    runs.length = 0;
  });

  const start = async (dbName: string, workerId: string, extra = {}) => {
    const app = await createJobsTestApp({
      dbName,
      options: { workerId, concurrency: 8, pollIntervalMs: 20, ...extra },
      providers: [CountingHandlers],
    });
    apps.push(app);
    return app;
  };

  it('two apps run each of 200 jobs exactly once', async () => {
    const dbName = uniqueDatabaseName('two_workers');
    const [a, b] = [await start(dbName, 'worker-a'), await start(dbName, 'worker-b')];
    const jobs = await a.jobs.enqueueMany(Array.from({ length: 200 }, (_, i) => ({ name: 'count', payload: { i } })));
    await waitFor(async () => (await b.jobs.stats()).completed === 200, '200 completed jobs', 20_000);
    const perJob = new Map<string, number>();
    for (const run of runs) perJob.set(run.jobId, (perJob.get(run.jobId) ?? 0) + 1);
    expect(perJob.size).toBe(200);
    expect([...perJob.values()].every((count) => count === 1)).toBe(true);
    expect(new Set(jobs.map((job) => job.id))).toEqual(new Set(perJob.keys()));
    const workers = new Set(runs.map((run) => run.worker));
    expect(workers).toEqual(new Set(['worker-a', 'worker-b']));
    expect(await a.jobs.stats()).toMatchObject({ completed: 200, pending: 0, running: 0 });
  });

  it('searches for expired leases about once per poll interval while busy, not once per job', async () => {
    const app = await start(uniqueDatabaseName('reclaim_rate'), 'busy', { pollIntervalMs: 1000, concurrency: 16 });
    const take = app.stores.claim.take.bind(app.stores.claim);
    const searches: number[] = [];
    app.stores.claim.take = (source, ...args) => {
      if (source === 'running') searches.push(Date.now());
      return take(source, ...args);
    };
    let lastStartAt = 0;
    const subscription = app.jobs.events$.subscribe((event) => {
      if (event.type === 'started') lastStartAt = Date.now();
    });
    const startedAt = Date.now();
    await app.jobs.enqueueMany(Array.from({ length: 300 }, (_, i) => ({ name: 'count', payload: { i } })));
    await waitFor(async () => (await app.jobs.stats()).completed === 300, '300 completed jobs', 20_000);
    subscription.unsubscribe();
    // While pending jobs kept it busy (from the enqueue until the last one started): one search per elapsed interval,
    // and a few from claims that found the last rows taken by others in flight. Polls that find the queue empty after
    // that search too, by design (each slot freed at the end wakes one); once per job would be 300.
    const whileBusy = searches.filter((at) => at >= startedAt && at < lastStartAt).length;
    const intervals = Math.ceil((lastStartAt - startedAt) / 1000);
    expect(whileBusy).toBeLessThanOrEqual(intervals + 3);
    expect(searches.length).toBeLessThan(300);
  });

  it('reclaims an expired running row, counting the lost attempt as LeaseExpired', async () => {
    const app = await start(uniqueDatabaseName('reclaim'), 'rescuer', { worker: false });
    const job = await app.jobs.enqueue('count', {}, { maxAttempts: 3 });
    // A worker that died mid-job: running, owned by someone else, lease in the past.
    await app.connection.collection('jobs').updateOne(
      { _id: new Types.ObjectId(job.id) },
      {
        $set: {
          status: 'running',
          lockedBy: 'dead-worker#1.x',
          lockedUntil: new Date(Date.now() - 1000),
          fencingToken: 1,
        },
      },
    );
    const claim = await app.get(JobClaimService).claimNext();
    expect(claim?.doc).toMatchObject({ attemptCount: 1, fencingToken: 2, status: 'running' });
    // The claim reads the row back without its history (`attempts`); the reclaim recorded the lost attempt there.
    expect(claim?.doc).not.toHaveProperty('attempts');
    expect((await app.jobs.findById(job.id))?.attempts).toEqual([
      expect.objectContaining({
        errorClass: 'LeaseExpired',
        error: 'Lease expired before the previous attempt finished',
      }),
    ]);
    expect(claim?.lockId.startsWith('rescuer#')).toBe(true);
    await app.get(JobClaimService).claimNext(); // nothing else to claim
    if (claim) await app.get(JobRunner).execute(claim);
    expect(runs).toEqual([{ jobId: job.id, worker: 'rescuer', attempt: 2 }]);
    expect(await app.jobs.findById(job.id)).toMatchObject({ status: 'completed', attemptCount: 1 });
  });

  it('dead-letters a reclaim that exhausts the attempts without running the handler', async () => {
    const app = await start(uniqueDatabaseName('reclaim_dead'), 'rescuer');
    const job = await app.jobs.enqueue('count', {}, { maxAttempts: 2, delayMs: 60_000 });
    await app.connection.collection('jobs').updateOne(
      { _id: new Types.ObjectId(job.id) },
      {
        $set: {
          status: 'running',
          attemptCount: 1,
          lockedBy: 'dead-worker#1.x',
          lockedUntil: new Date(Date.now() - 1),
        },
      },
    );
    await waitFor(async () => (await app.jobs.findById(job.id))?.status === 'dead', 'the job to be dead-lettered');
    const dead = await app.jobs.findById(job.id);
    expect(dead).toMatchObject({ attemptCount: 2, lockedBy: null, lockedUntil: null });
    expect(dead?.attempts.map((a) => a.errorClass)).toEqual(['LeaseExpired']);
    expect(runs).toEqual([]);
  });

  it('ignores a late finalize from an owner whose job was reclaimed', async () => {
    const app = await start(uniqueDatabaseName('late_finalize'), 'first', { worker: false });
    const job = await app.jobs.enqueue('count', {});
    const claims = app.get(JobClaimService);
    const first = await claims.claimNext();
    if (!first) throw new Error('expected a claim');
    // The first owner stalls past its lease; a second worker reclaims the row.
    await app.connection
      .collection('jobs')
      .updateOne({ _id: first.doc._id }, { $set: { lockedUntil: new Date(Date.now() - 1) } });
    const second = await claims.claimNext();
    expect(second?.doc.fencingToken).toBe(2);
    const before = await app.jobs.findById(job.id);
    const at = new Date();
    expect(await app.stores.outcome.complete(first.doc._id, first.lockId, at)).toBe(false);
    expect(
      await app.stores.outcome.recordFailure(
        first.doc._id,
        first.lockId,
        { at, error: 'late', errorClass: 'Error' },
        { status: 'dead' },
      ),
    ).toBe(false);
    expect(await app.stores.outcome.release(first.doc._id, first.lockId, at)).toBe(false);
    expect(
      await app.stores.lease.renewLease(first.doc._id, first.lockId, new Date(Date.now() + 60_000), at),
    ).toBeNull();
    const after = await app.jobs.findById(job.id);
    expect(after).toEqual(before);
    expect(after).toMatchObject({ status: 'running', lockedBy: second?.lockId, attemptCount: 1 });
  });

  it('applies a renewal that reaches the server after the deadline while nobody took the row over (the lock is the fence)', async () => {
    const app = await start(uniqueDatabaseName('renew_expired'), 'owner', { worker: false });
    const job = await app.jobs.enqueue('count', {});
    const claim = await app.get(JobClaimService).claimNext();
    if (!claim) throw new Error('expected a claim');
    const deadline = new Date(Date.now() - 1);
    await app.connection.collection('jobs').updateOne({ _id: claim.doc._id }, { $set: { lockedUntil: deadline } });
    // The beat that fell on the deadline: the lease sent it while live; only a reclaim (a new lock) may refuse it.
    const requested = new Date(Date.now() + 60_000);
    expect(await app.stores.lease.renewLease(claim.doc._id, claim.lockId, requested, new Date())).toEqual(requested);
    expect((await app.jobs.findById(job.id))?.lockedUntil).toEqual(requested);
  });
});
