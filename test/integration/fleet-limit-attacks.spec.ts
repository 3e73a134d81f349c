import { afterAll, afterEach, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import type { Db, MongoClient } from 'mongodb';
import { mongo, type Types } from 'mongoose';
import { type JobExecutionContext, JobHandler } from '../../lib';
import { RateTokensRepository } from '../../lib/claim/rate-tokens.repository';
import { concurrencySlotKey } from '../../lib/claim/slot-keys';
import { createJobsTestApp, deferred, type JobsTestApp, waitFor } from '../support/jobs-app';
import { connectTestClient, uniqueDatabaseName } from '../support/test-database';

/** Job ids of the executions below, in start order. */
const ran: string[] = [];
let gate = deferred();

@Injectable()
class LimitedHandlers {
  @JobHandler('limited.one', { globalConcurrency: 1 })
  one(_payload: unknown, ctx: JobExecutionContext) {
    ran.push(ctx.jobId);
  }

  @JobHandler('limited.rate', { rateLimit: { max: 5, perMs: 60_000 } })
  rate(_payload: unknown, ctx: JobExecutionContext) {
    ran.push(ctx.jobId);
  }

  @JobHandler('limited.group', { groupConcurrency: 1 })
  group(_payload: unknown, ctx: JobExecutionContext) {
    ran.push(ctx.jobId);
  }

  /** Runs until the test opens `gate`: no execution ends (and wakes the poll loop) meanwhile. */
  @JobHandler('unlimited')
  async unlimited(_payload: unknown, ctx: JobExecutionContext) {
    ran.push(ctx.jobId);
    await gate.promise;
  }
}

describe('rows of a limited name the server refuses to claim', () => {
  let client: MongoClient;
  let db: Db;
  let app: JobsTestApp | undefined;
  beforeAll(async () => {
    client = await connectTestClient();
  });
  afterEach(async () => {
    await app?.close();
    app = undefined;
    await db?.dropDatabase().catch(() => undefined);
    ran.length = 0;
  });
  afterAll(async () => {
    await client?.close();
  });

  const start = async (label: string) => {
    const dbName = uniqueDatabaseName(label);
    db = client.db(dbName);
    app = await createJobsTestApp({
      dbName,
      providers: [LimitedHandlers],
      options: { pollIntervalMs: 20, leaseMs: 600 },
    });
    return app;
  };

  /** A row written by something other than this library, sorted before every normal job (priority 100). */
  const insertRaw = async (name: string, fields: Record<string, unknown>) => {
    const at = new Date(Date.now() - 60_000);
    const { insertedId } = await db.collection('jobs').insertOne({
      name,
      payload: null,
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
  const statusOf = async (id: Types.ObjectId) => (await db.collection('jobs').findOne({ _id: id }))?.status;

  it.each(['limited.one', 'limited.rate', 'limited.group'])(
    '%s: a pending row whose claim is refused is marked failed, and the job behind it runs',
    async (name) => {
      const jobs = await start('limit_poison_claim');
      const poison = await insertRaw(name, { fencingToken: 'x', group: 'g' });
      const healthy = await jobs.jobs.enqueue(name, {}, { group: 'g' });
      await waitFor(() => ran.includes(healthy.id), 'the healthy job behind the refused row to run', 3_000);
      expect(await statusOf(poison)).toBe('failed');
      expect(ran).not.toContain(poison.toHexString());
    },
  );

  it('an expired running row holding the only slot whose reclaim is refused is marked failed, freeing its slot', async () => {
    const jobs = await start('limit_poison_reclaim');
    const poison = await insertRaw('limited.one', {
      status: 'running',
      attemptCount: 'x',
      lockedBy: 'crashed#1',
      lockedUntil: new Date(Date.now() - 60_000),
      concurrencySlot: concurrencySlotKey('limited.one', 0),
    });
    const healthy = await jobs.jobs.enqueue('limited.one', {});
    await waitFor(() => ran.includes(healthy.id), 'the healthy job to get the slot', 3_000);
    const row = await db.collection('jobs').findOne({ _id: poison });
    expect(row).toMatchObject({ status: 'failed' });
    expect(row?.concurrencySlot).toBeUndefined();
  });

  it('runNow of a refused row of a limited name sets it aside (not_started, failed) instead of throwing', async () => {
    const dbName = uniqueDatabaseName('limit_poison_run_now');
    db = client.db(dbName);
    app = await createJobsTestApp({ dbName, providers: [LimitedHandlers], options: { worker: false } });
    const poison = await insertRaw('limited.one', { fencingToken: 'x' });
    await expect(app.jobs.runNow(poison.toHexString())).resolves.toMatchObject({
      kind: 'not_started',
      job: { status: 'failed' },
    });
  });
});

describe('a limited name whose claims keep failing', () => {
  it('does not hold back the unlimited names: their jobs all start in one poll', async () => {
    const app = await createJobsTestApp({
      dbName: uniqueDatabaseName('limit_failing_name'),
      providers: [LimitedHandlers],
      // A poll loop that sleeps after a failed claim does not come back within this test.
      options: { pollIntervalMs: 60_000, concurrency: 25 },
    });
    try {
      // E.g. a database user allowed to write the jobs collection but not `<collection>_rate_tokens`.
      const refusal = new mongo.MongoServerError({ message: 'injected: not authorized on _rate_tokens', code: 13 });
      jest.spyOn(app.get(RateTokensRepository), 'take').mockRejectedValue(refusal);
      const jobs = await app.jobs.enqueueMany([
        { name: 'limited.rate' },
        ...Array.from({ length: 20 }, () => ({ name: 'unlimited' })),
      ]);
      const unlimited = jobs.slice(1).map((job) => job.id);
      // Well under the poll interval: a loop that slept after the failed claim would not make it.
      await waitFor(() => unlimited.every((id) => ran.includes(id)), 'every unlimited job to start', 30_000);
      expect(ran).not.toContain(jobs[0].id);
    } finally {
      gate.resolve();
      gate = deferred();
      jest.restoreAllMocks();
      await app.close();
      ran.length = 0;
    }
  }, 45_000);
});
