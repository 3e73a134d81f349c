import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import type { Collection } from 'mongodb';
import { Types } from 'mongoose';
import { type JobExecutionContext, JobHandler } from '../../lib';
import type { JobDocument } from '../../lib/model/job-document';
import { createJobsTestApp, deferred, type JobsTestApp, waitFor } from '../support/jobs-app';
import { uniqueDatabaseName } from '../support/test-database';

const MODULE_LEASE_MS = 2_000;

/** A running row as a worker's claim leaves it, `lockedUntil` from now; `leaseMs` as a claim of this version records it. */
function runningRow(lockedUntilInMs: number, leaseMs?: number): JobDocument {
  const at = new Date();
  return {
    _id: new Types.ObjectId(),
    name: 'elsewhere',
    payload: null,
    status: 'running',
    runAt: at,
    priority: 0,
    attemptCount: 0,
    maxAttempts: 3,
    attempts: [],
    fencingToken: 1,
    lockedBy: 'worker#1',
    lockedUntil: new Date(at.getTime() + lockedUntilInMs),
    ...(leaseMs !== undefined && { leaseMs }),
    startedAt: at,
    createdAt: at,
    updatedAt: at,
  };
}

const started = deferred();
const release = deferred();

@Injectable()
class LongLeaseHandlers {
  /** A lease three times the module's: its claim records the module's, its renewals its own. */
  @JobHandler('long.lease', { leaseMs: 3 * 300 })
  async run(_payload: unknown, ctx: JobExecutionContext) {
    started.resolve();
    await Promise.race([release.promise, new Promise((resolve) => ctx.signal.addEventListener('abort', resolve))]);
  }
}

/** How far a cancel raises a running row's deadline: by the lease its run records, from the deadline it holds. */
describe('cancel raises a running job’s deadline by its settle window', () => {
  let app: JobsTestApp;
  let jobs: Collection<JobDocument>;

  beforeAll(async () => {
    app = await createJobsTestApp({
      dbName: uniqueDatabaseName('cancel_settle_window'),
      options: { worker: false, leaseMs: MODULE_LEASE_MS, retention: { cancelled: 1 } },
    });
    jobs = app.connection.collection<JobDocument>('jobs') as unknown as Collection<JobDocument>;
  });
  afterAll(async () => {
    await app?.close();
  });

  it('by the lease the row records, and stamps no expiry before that', async () => {
    const row = runningRow(1_000, 7_000);
    await jobs.insertOne(row);
    const cancelled = await app.jobs.cancel(row._id.toHexString());
    const expected = (row.lockedUntil as Date).getTime() + 7_000;
    expect(cancelled).toMatchObject({ status: 'cancelled', lockedBy: null });
    expect(cancelled?.lockedUntil?.getTime()).toBe(expected);
    expect(cancelled?.expiresAt?.getTime()).toBe(expected);
    const stored = await jobs.findOne({ _id: row._id });
    expect(stored?.lockedUntil?.getTime()).toBe(expected);
    expect(stored?.leaseMs).toBeUndefined();
  });

  it('a row an older version claimed (no lease recorded): by this process’s lease for the name', async () => {
    const row = runningRow(1_000);
    await jobs.insertOne(row);
    const cancelled = await app.jobs.cancel(row._id.toHexString());
    expect(cancelled?.lockedUntil?.getTime()).toBe((row.lockedUntil as Date).getTime() + MODULE_LEASE_MS);
    // That older worker's own writes are fenced by its lock: none of them matches the cancelled row any more.
    const owned = { _id: row._id, lockedBy: 'worker#1', status: 'running' as const };
    const renewal = await jobs.updateOne(owned, { $max: { lockedUntil: new Date(Date.now() + 60_000) } });
    const completion = await jobs.updateOne(owned, { $set: { status: 'completed' }, $unset: { lockedUntil: '' } });
    expect([renewal.matchedCount, completion.matchedCount]).toEqual([0, 0]);
    expect(await app.jobs.findById(row._id.toHexString())).toMatchObject({ status: 'cancelled' });
  });

  it('from the deadline a renewal set between the cancel’s read and its write', async () => {
    const row = runningRow(1_000, 3_000);
    await jobs.insertOne(row);
    const renewedUntil = new Date((row.lockedUntil as Date).getTime() + 5_000);
    // The owner's renewal lands after the cancel read the row and before it wrote.
    const store = app.stores.admin as unknown as { collection: Collection<JobDocument> };
    const collection = store.collection;
    const findOneAndUpdate = collection.findOneAndUpdate.bind(collection);
    let renewed = false;
    collection.findOneAndUpdate = (async (...args: Parameters<typeof findOneAndUpdate>) => {
      if (!renewed) {
        renewed = true;
        await jobs.updateOne({ _id: row._id }, { $set: { lockedUntil: renewedUntil, leaseMs: 4_000 } });
      }
      return findOneAndUpdate(...args);
    }) as typeof collection.findOneAndUpdate;
    try {
      const cancelled = await app.jobs.cancel(row._id.toHexString());
      const expected = renewedUntil.getTime() + 4_000;
      expect(renewed).toBe(true);
      expect(cancelled?.lockedUntil?.getTime()).toBe(expected);
      expect((await jobs.findOne({ _id: row._id }))?.lockedUntil?.getTime()).toBe(expected);
      // A retry is due no earlier.
      expect((await app.jobs.retry(row._id.toHexString()))?.runAt.getTime()).toBe(expected);
    } finally {
      collection.findOneAndUpdate = findOneAndUpdate;
    }
  });

  it('the claim records the module’s lease, the first renewal the handler’s; a cancel raises by the latter', async () => {
    const dbName = uniqueDatabaseName('cancel_recorded_lease');
    const worker = await createJobsTestApp({
      dbName,
      options: { leaseMs: 300, pollIntervalMs: 20 },
      providers: [LongLeaseHandlers],
    });
    try {
      const job = await worker.jobs.enqueue('long.lease', null);
      const rows = worker.connection.collection('jobs');
      const id = new Types.ObjectId(job.id);
      await started.promise;
      const claimed = await rows.findOne({ _id: id });
      expect(claimed?.leaseMs).toBe(300);
      expect(claimed?.lockedUntil.getTime() - claimed?.startedAt.getTime()).toBe(300);
      await waitFor(async () => (await rows.findOne({ _id: id }))?.leaseMs === 900, 'the first renewal');
      const before = (await rows.findOne({ _id: id }))?.lockedUntil as Date;
      const cancelled = await worker.jobs.cancel(job.id);
      // A renewal may land between the read above and the cancel: the deadline is raised from the later one.
      expect(cancelled?.lockedUntil?.getTime()).toBeGreaterThanOrEqual(before.getTime() + 900);
      expect(cancelled?.lockedUntil?.getTime()).toBeLessThanOrEqual(Date.now() + 900 + 900);
    } finally {
      release.resolve();
      await worker.close();
    }
  });

  it('a pending job keeps what it had: nothing runs it, nothing to wait for', async () => {
    const job = await app.jobs.enqueue('elsewhere', null, { strict: false });
    const cancelled = await app.jobs.cancel(job.id);
    expect(cancelled).toMatchObject({ status: 'cancelled', lockedUntil: null });
    expect(await app.jobs.purge({ status: 'cancelled', name: 'elsewhere' })).toBeGreaterThanOrEqual(1);
    expect(await app.jobs.findById(job.id)).toBeNull();
  });
});
