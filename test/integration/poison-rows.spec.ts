import { afterAll, afterEach, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import type { Collection, Document, MongoClient } from 'mongodb';
import { mongo } from 'mongoose';
import { JobHandler } from '../../lib';
import { JobClaimService } from '../../lib/claim/job-claim.service';
import { createJobsTestApp, type JobsTestApp, waitFor } from '../support/jobs-app';
import { connectTestClient, uniqueDatabaseName } from '../support/test-database';

const ran: string[] = [];

@Injectable()
class TickHandlers {
  @JobHandler('tick')
  tick(payload: { label: string }) {
    ran.push(payload.label);
  }
}

describe('rows the server refuses to claim', () => {
  let app: JobsTestApp;
  let client: MongoClient;
  let raw: Collection<Document>;

  beforeAll(async () => {
    const dbName = uniqueDatabaseName('poison');
    app = await createJobsTestApp({ dbName, options: { pollIntervalMs: 20 }, providers: [TickHandlers] });
    client = await connectTestClient({ maxPoolSize: 2 });
    raw = client.db(dbName).collection('jobs');
  });
  afterAll(async () => {
    await client.close();
    await app.close();
  });

  /** A row written by something other than this library, sorted before every normal job (priority 100). */
  const insertRaw = async (label: string, fields: Record<string, unknown>) => {
    const at = new Date(Date.now() - 60_000);
    const { insertedId } = await raw.insertOne({
      name: 'tick',
      payload: { label },
      status: 'pending',
      runAt: at,
      priority: 100,
      attemptCount: 0,
      maxAttempts: 5,
      attempts: [],
      fencingToken: 0,
      createdAt: at,
      updatedAt: at,
      ...fields,
    });
    return insertedId;
  };

  const completed = (id: string) =>
    waitFor(async () => (await app.jobs.findById(id))?.status === 'completed', `job ${id} completed`, 3_000);

  it('marks a pending row whose claim the server rejects failed, and runs the due job behind it', async () => {
    const poison = await insertRaw('poison-claim', { fencingToken: 'x' });
    const normal = await app.jobs.enqueue('tick', { label: 'behind-claim' });
    await completed(normal.id);
    const row = await app.jobs.findById(poison.toHexString());
    expect(row).toMatchObject({ status: 'failed', lockedBy: null });
    expect(row?.lastError).toContain('could not be claimed');
    expect(ran).not.toContain('poison-claim');
  });

  it('marks a running row whose reclaim the server rejects failed, and runs the due job behind it', async () => {
    const poison = await insertRaw('poison-reclaim', {
      status: 'running',
      attemptCount: 'x',
      lockedBy: 'crashed#1',
      lockedUntil: new Date(Date.now() - 60_000),
    });
    const normal = await app.jobs.enqueue('tick', { label: 'behind-reclaim' });
    await completed(normal.id);
    await waitFor(
      async () => (await app.jobs.findById(poison.toHexString()))?.status === 'failed',
      'the poison running row to be failed',
      3_000,
    );
    expect((await app.jobs.findById(poison.toHexString()))?.lastError).toContain('could not be reclaimed');
    expect(ran).not.toContain('poison-reclaim');
  });

  it('skips a poison row it cannot mark failed either, and keeps running the rest', async () => {
    const setAside = jest
      .spyOn(app.stores.claim, 'setAside')
      .mockRejectedValue(new mongo.MongoServerError({ message: 'injected: refused to mark failed', code: 2 }));
    const poison = await insertRaw('poison-stuck', { fencingToken: 'x' });
    const first = await app.jobs.enqueue('tick', { label: 'after-stuck-1' });
    await completed(first.id);
    const second = await app.jobs.enqueue('tick', { label: 'after-stuck-2' });
    await completed(second.id);
    expect(await app.jobs.findById(poison.toHexString())).toMatchObject({ status: 'pending' });
    // Set aside in memory after the first failure: not probed again on every poll.
    expect(setAside).toHaveBeenCalledTimes(1);
    setAside.mockRestore();
    await raw.deleteOne({ _id: poison });
  });

  it('reports down with the error while claims keep failing, and up once they succeed again', async () => {
    // Up before claims fail: waited for, since on a loaded machine a late poll or a slow ping can report down a moment.
    await waitFor(async () => (await app.jobs.workerStatus()).status === 'up', 'status up', 2_000);
    const take = jest.spyOn(app.stores.claim, 'take').mockRejectedValue(new Error('injected: claims fail'));
    await waitFor(async () => (await app.jobs.workerStatus()).status === 'down', 'status down', 2_000);
    const down = await app.jobs.workerStatus();
    expect(down.reason).toContain('injected: claims fail');
    expect(down.database).toBe('up');
    take.mockRestore();
    await waitFor(async () => (await app.jobs.workerStatus()).status === 'up', 'status up again', 2_000);
  });
});

type FindOneAndUpdate = (filter: Document, update: Document, options?: Document) => Promise<unknown>;

/**
 * Makes the server's answer to every claim and reclaim write (those that bump `fencingToken`) a refusal with `code`,
 * `times` times (default: until the returned restore is called), as a server refusing the update's shape would;
 * `only: 'claims'` leaves reclaims alone.
 */
function refuseClaimWrites(
  app: JobsTestApp,
  code: number,
  { times = Number.POSITIVE_INFINITY, only }: { times?: number; only?: 'claims' } = {},
): () => void {
  const collection = (app.stores.claim as unknown as { collection: { findOneAndUpdate: FindOneAndUpdate } }).collection;
  const original = collection.findOneAndUpdate;
  let left = times;
  collection.findOneAndUpdate = function (this: unknown, filter, update, options) {
    const write = update as { $inc?: { fencingToken?: number }; $set?: { status?: string } };
    const targeted = write.$inc?.fencingToken && (only !== 'claims' || write.$set?.status === 'running');
    if (targeted && left > 0) {
      left -= 1;
      return Promise.reject(new mongo.MongoServerError({ message: `injected refusal ${code}`, code }));
    }
    return original.call(this, filter, update, options);
  };
  return () => {
    collection.findOneAndUpdate = original;
  };
}

describe('claim refusals that are not about one row', () => {
  let app: JobsTestApp;
  let client: MongoClient;
  let raw: Collection<Document>;
  let dbName: string;

  beforeAll(async () => {
    dbName = uniqueDatabaseName('refusals');
    app = await createJobsTestApp({ dbName, options: { pollIntervalMs: 20 }, providers: [TickHandlers] });
    client = await connectTestClient({ maxPoolSize: 2 });
    raw = client.db(dbName).collection('jobs');
  });
  afterAll(async () => {
    await client.close();
    await app.close();
  });

  it('fails no healthy row when the server refuses every claim with code 2, and turns health down', async () => {
    const failed: string[] = [];
    const subscription = app.jobs.events$.subscribe((event) => {
      if (event.type === 'failed') failed.push(event.jobId);
    });
    const restore = refuseClaimWrites(app, 2);
    const ids = [];
    for (const label of ['healthy-1', 'healthy-2', 'healthy-3'])
      ids.push((await app.jobs.enqueue('tick', { label })).id);
    await waitFor(async () => (await app.jobs.workerStatus()).status === 'down', 'status down', 3_000);
    expect((await app.jobs.workerStatus()).reason).toContain('injected refusal 2');
    expect(await raw.countDocuments({ status: 'failed' })).toBe(0);
    expect(failed).toEqual([]);
    restore();
    for (const id of ids) {
      await waitFor(async () => (await app.jobs.findById(id))?.status === 'completed', `job ${id} completed`, 3_000);
    }
    subscription.unsubscribe();
  });
});

describe('claim service and runNow on refused rows (no poll loop)', () => {
  let app: JobsTestApp;
  let client: MongoClient;
  let raw: Collection<Document>;

  beforeAll(async () => {
    const dbName = uniqueDatabaseName('refused-direct');
    app = await createJobsTestApp({ dbName, options: { worker: false }, providers: [TickHandlers] });
    client = await connectTestClient({ maxPoolSize: 2 });
    raw = client.db(dbName).collection('jobs');
  });
  afterEach(async () => {
    await raw.deleteMany({});
  });
  afterAll(async () => {
    await client.close();
    await app.close();
  });

  const insertPoison = async (label: string, priority = 100) => {
    const at = new Date(Date.now() - 60_000);
    const { insertedId } = await raw.insertOne({
      name: 'tick',
      payload: { label },
      status: 'pending',
      runAt: at,
      priority,
      attemptCount: 0,
      maxAttempts: 5,
      attempts: [],
      fencingToken: 'x',
      createdAt: at,
      updatedAt: at,
    });
    return insertedId.toHexString();
  };

  it('runNow sets a row the server refuses to claim aside as failed and answers not_started', async () => {
    const poison = await insertPoison('run-now-poison');
    const outcome = await app.jobs.runNow(poison);
    expect(outcome).toMatchObject({ kind: 'not_started', job: { id: poison, status: 'failed' } });
    expect((await app.jobs.findById(poison))?.lastError).toContain('could not be claimed');
    expect(ran).not.toContain('run-now-poison');
  });

  it('runNow runs a healthy row when the server refuses its claim once for reasons not about it', async () => {
    const job = await app.jobs.enqueue('tick', { label: 'run-now-refused-once' });
    const restore = refuseClaimWrites(app, 2, { times: 1 });
    try {
      expect(await app.jobs.runNow(job.id)).toMatchObject({ kind: 'executed', job: { status: 'completed' } });
    } finally {
      restore();
    }
    expect(ran).toContain('run-now-refused-once');
  });

  it('throws the refusal (marking nothing) when the search it came from finds no row', async () => {
    const restore = refuseClaimWrites(app, 14, { times: 1, only: 'claims' });
    try {
      await expect(app.get(JobClaimService).claimNext()).rejects.toThrow('injected refusal 14');
    } finally {
      restore();
    }
  });

  it('takes the row the probe finds when its claim succeeds (the refusal was about a row that moved on)', async () => {
    const job = await app.jobs.enqueue('tick', { label: 'moved-in-front' });
    const restore = refuseClaimWrites(app, 14, { times: 1, only: 'claims' });
    try {
      const claim = await app.get(JobClaimService).claimNext();
      expect(claim?.doc._id.toHexString()).toBe(job.id);
      expect(claim?.doc.status).toBe('running');
    } finally {
      restore();
    }
    expect(await raw.countDocuments({ status: 'failed' })).toBe(0);
  });

  it('sets a row aside only when its retry is refused with the same code as the claim', async () => {
    const poison = await insertPoison('other-code');
    const restore = refuseClaimWrites(app, 2, { times: 1, only: 'claims' });
    try {
      await expect(app.get(JobClaimService).claimNext()).rejects.toMatchObject({ code: 14 });
    } finally {
      restore();
    }
    expect(await app.jobs.findById(poison)).toMatchObject({ status: 'pending' });
    expect(await app.get(JobClaimService).claimNext()).toBeNull();
    expect(await app.jobs.findById(poison)).toMatchObject({ status: 'failed' });
  });

  it('sets aside at most a few rows per claim step with no claim in between, then throws', async () => {
    const poison = [];
    for (let i = 0; i < 6; i += 1) poison.push(await insertPoison(`flood-${i}`));
    await expect(app.get(JobClaimService).claimNext()).rejects.toThrow('set aside');
    expect(await raw.countDocuments({ status: 'failed' })).toBe(5);
    expect(await raw.countDocuments({ status: 'pending' })).toBe(1);
  });

  it('does not remember a row whose mark-failed write failed for a non-refusal: it is probed again next time', async () => {
    const poison = await insertPoison('mark-failed-network');
    const setAside = jest
      .spyOn(app.stores.claim, 'setAside')
      .mockRejectedValueOnce(new mongo.MongoNetworkError('injected: connection reset'));
    await expect(app.get(JobClaimService).claimNext()).rejects.toThrow('injected: connection reset');
    expect(await app.get(JobClaimService).claimNext()).toBeNull();
    expect(setAside).toHaveBeenCalledTimes(2);
    setAside.mockRestore();
    expect(await app.jobs.findById(poison)).toMatchObject({ status: 'failed' });
  });
});
