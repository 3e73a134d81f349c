import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import type { Db, MongoClient } from 'mongodb';
import { Types } from 'mongoose';
import { InvalidOptionError, type JobExecutionContext, JobHandler, type JobsModuleOptions } from '../../lib';
import { concurrencySlotKey } from '../../lib/claim/slot-keys';
import { createJobsTestApp, deferred, type JobsTestApp, waitFor } from '../support/jobs-app';
import { sleep } from '../support/sleep';
import { connectTestClient, uniqueDatabaseName } from '../support/test-database';

/** Executions of the handlers below, in start order. */
const starts: { jobId: string; at: number; attempt: number }[] = [];
/** Released by each test to let blocked handlers end. */
let gate = deferred();
/** Set when a blocked handler has seen its signal abort. */
let aborted = deferred();

/** Blocks until the gate opens, whatever its signal says. */
async function stubborn(_payload: unknown, ctx: JobExecutionContext) {
  starts.push({ jobId: ctx.jobId, at: Date.now(), attempt: ctx.attempt });
  ctx.signal.addEventListener('abort', () => aborted.resolve(), { once: true });
  await gate.promise;
}

@Injectable()
class SlotHandlers {
  @JobHandler('one.at.a.time', { globalConcurrency: 1 })
  one(payload: unknown, ctx: JobExecutionContext) {
    return stubborn(payload, ctx);
  }

  @JobHandler('one.timed', { globalConcurrency: 1, timeoutMs: 50 })
  timed(payload: unknown, ctx: JobExecutionContext) {
    return stubborn(payload, ctx);
  }

  @JobHandler('free')
  free() {}
}

describe('a fleet-wide slot is held until its holder’s lease ends', () => {
  let client: MongoClient;
  let db: Db;
  const apps: JobsTestApp[] = [];
  beforeAll(async () => {
    client = await connectTestClient();
  });
  afterEach(async () => {
    gate.resolve();
    await Promise.all(apps.splice(0).map((app) => app.close()));
    await db?.dropDatabase().catch(() => undefined);
    starts.length = 0;
    gate = deferred();
    aborted = deferred();
  });
  afterAll(async () => {
    await client?.close();
  });

  const startApp = async (label: string, options: JobsModuleOptions = {}) => {
    const dbName = uniqueDatabaseName(label);
    db = client.db(dbName);
    const app = await createJobsTestApp({
      dbName,
      providers: [SlotHandlers],
      options: { pollIntervalMs: 20, leaseMs: 600, ...options },
    });
    apps.push(app);
    return app;
  };
  const row = (id: string) => db.collection('jobs').findOne({ _id: new Types.ObjectId(id) });

  it('a saturated name does not hold back an unlimited one, and the loop does not spin on it', async () => {
    // A lease long enough that a loaded machine cannot lose it while the test waits: this test is about claims, and a
    // lost 600 ms lease (one run at load 18) starts the limited job again.
    const app = await startApp('slots_hol', { leaseMs: 10_000 });
    const limited = await app.jobs.enqueueMany(Array.from({ length: 3 }, () => ({ name: 'one.at.a.time' })));
    await waitFor(() => starts.length === 1, 'the first limited job to start');
    await app.jobs.enqueueMany(Array.from({ length: 30 }, () => ({ name: 'free' })));
    await waitFor(async () => (await app.jobs.stats()).completed === 30, 'every unlimited job to complete');
    expect((await Promise.all(limited.map((job) => row(job.id)))).map((doc) => doc?.status).sort()).toEqual([
      'pending',
      'pending',
      'running',
    ]);
    // While only the saturated name has work: one claim of it per poll interval at most, not a busy loop.
    const client = app.connection.getClient();
    let commands = 0;
    const count = () => {
      commands += 1;
    };
    client.on('commandStarted', count);
    await sleep(400);
    client.off('commandStarted', count);
    expect(starts).toHaveLength(1);
    expect(commands).toBeLessThan(100); // 400 ms / 20 ms polls ≈ 20 polls of a few commands each; a spin is thousands
  });

  it('beside limited names, a job enqueued while an empty claim is in flight is not skipped until the next poll', async () => {
    // Polls an hour apart: only the enqueue's wake-up can get the job picked up.
    const app = await startApp('slots_arrival_race', { pollIntervalMs: 3_600_000 });
    const claims = app.stores.claim;
    const take = claims.take.bind(claims);
    const paused = deferred();
    const resume = deferred();
    let armed = true;
    // Our own claim store (not mongoose): the first claim of the unlimited names that finds nothing is held until a
    // job has been enqueued meanwhile, as a slow server would hold it.
    claims.take = async (...args: Parameters<typeof take>) => {
      const row = await take(...args);
      if (armed && row === null && args[0] === 'pending' && args[4].names.includes('free')) {
        armed = false;
        paused.resolve();
        await resume.promise;
      }
      return row;
    };
    const first = await app.jobs.enqueue('free', {});
    await paused.promise; // the claim after `first`'s found nothing, and is still in flight
    const second = await app.jobs.enqueue('free', {});
    resume.resolve();
    await waitFor(async () => (await row(second.id))?.status === 'completed', 'the second job to run', 5_000);
    expect((await row(first.id))?.status).toBe('completed');
  });

  it('a run cancelled while it runs keeps its slot until its old lease ends', async () => {
    const app = await startApp('slots_cancel');
    const first = await app.jobs.enqueue('one.at.a.time', {});
    await waitFor(() => starts.length === 1, 'the first job to start');
    const cancelled = await app.jobs.cancel(first.id);
    expect(cancelled?.status).toBe('cancelled');
    const held = await row(first.id);
    expect(held?.concurrencySlot).toBe(concurrencySlotKey('one.at.a.time', 0));
    const second = await app.jobs.enqueue('one.at.a.time', {});
    await waitFor(() => starts.length === 2, 'the second job to start', 10_000);
    // The handler of the cancelled run never returned (it ignores its signal): the second started only once the
    // deadline the cancelled run could still rely on had passed.
    const lockedUntil = (await row(first.id))?.lockedUntil as Date;
    expect(starts[1].jobId).toBe(second.id);
    expect(starts[1].at).toBeGreaterThanOrEqual(lockedUntil.getTime());
    expect((await row(first.id))?.concurrencySlot).toBeUndefined(); // freed by the claim that reused it
  });

  it('a handler that ignores its timeout abort keeps the slot until its lease runs out, then its job is reclaimed first', async () => {
    const app = await startApp('slots_ignored_abort');
    const first = await app.jobs.enqueue('one.timed', {});
    await waitFor(() => starts.length === 1, 'the first job to start');
    await app.jobs.enqueue('one.timed', {});
    await aborted.promise; // timed out; it keeps running
    await waitFor(() => starts.length === 2, 'another execution to start', 10_000);
    const firstExecution = starts[0];
    const next = starts[1];
    // The next execution is the timed-out job itself, taken over once its lease ran out (its attempt counted),
    // not the waiting job: the slot was never free while the first handler may have been running.
    expect(next.jobId).toBe(first.id);
    expect(next.attempt).toBe(firstExecution.attempt + 1);
    const doc = await row(first.id);
    expect(doc?.attempts.at(-1)?.errorClass).toBe('LeaseExpired');
  });

  it('a crashed worker’s slot comes back when its lease runs out: its job is reclaimed with it, the lost attempt counted', async () => {
    const dbName = uniqueDatabaseName('slots_crash');
    db = client.db(dbName);
    const at = new Date();
    const lockedUntil = new Date(at.getTime() + 400);
    const crashedId = new Types.ObjectId();
    await db.collection('jobs').insertOne({
      _id: crashedId,
      name: 'one.at.a.time',
      payload: null,
      status: 'running',
      runAt: at,
      priority: 0,
      attemptCount: 0,
      maxAttempts: 5,
      attempts: [],
      fencingToken: 1,
      lockedBy: 'crashed-worker#1',
      lockedUntil,
      startedAt: at,
      concurrencySlot: concurrencySlotKey('one.at.a.time', 0),
      createdAt: at,
      updatedAt: at,
    });
    const app = await createJobsTestApp({
      dbName,
      providers: [SlotHandlers],
      options: { pollIntervalMs: 20, leaseMs: 600 },
    });
    apps.push(app);
    const waiting = await app.jobs.enqueue('one.at.a.time', {});
    await waitFor(() => starts.length === 1, 'an execution to start', 10_000);
    expect(starts[0].jobId).toBe(crashedId.toHexString());
    expect(starts[0].at).toBeGreaterThanOrEqual(lockedUntil.getTime());
    const reclaimed = await row(crashedId.toHexString());
    expect(reclaimed).toMatchObject({ attemptCount: 1, concurrencySlot: concurrencySlotKey('one.at.a.time', 0) });
    expect((await row(waiting.id))?.status).toBe('pending');
    gate.resolve();
    await waitFor(() => starts.length === 2, 'the waiting job to start after it');
    expect(starts[1].jobId).toBe(waiting.id);
  });

  it('runNow does not exceed a limit: conflict(limit_reached) while the slot is held, executed once it is free', async () => {
    // No poll loop: only runNow claims here.
    const app = await startApp('slots_run_now', { worker: false });
    const first = await app.jobs.enqueue('one.at.a.time', {});
    const second = await app.jobs.enqueue('one.at.a.time', {});
    const firstRun = app.jobs.runNow(first.id);
    await waitFor(() => starts.length === 1, 'the first job to start');
    expect(await app.jobs.runNow(second.id)).toMatchObject({ kind: 'conflict', reason: 'limit_reached' });
    expect((await row(second.id))?.status).toBe('pending');
    gate.resolve();
    expect(await firstRun).toMatchObject({ kind: 'executed' });
    expect(await app.jobs.runNow(second.id)).toMatchObject({ kind: 'executed', job: { status: 'completed' } });
  });
});

describe('fleet-wide limits: bad input is refused before anything is stored', () => {
  const invalid: [string, string, object][] = [
    ['globalConcurrency', '0', { globalConcurrency: 0 }],
    ['globalConcurrency', '-1', { globalConcurrency: -1 }],
    ['globalConcurrency', '1.5', { globalConcurrency: 1.5 }],
    ['globalConcurrency', 'Infinity', { globalConcurrency: Number.POSITIVE_INFINITY }],
    ['globalConcurrency', 'NaN', { globalConcurrency: Number.NaN }],
    ['globalConcurrency', '1001 (above the slots a claim lists)', { globalConcurrency: 1001 }],
    ['groupConcurrency', '0', { groupConcurrency: 0 }],
    ['groupConcurrency', '2.5', { groupConcurrency: 2.5 }],
    ['rateLimit', 'null', { rateLimit: null }],
    ['rateLimit.max', '0', { rateLimit: { max: 0, perMs: 1000 } }],
    ['rateLimit.max', 'NaN', { rateLimit: { max: Number.NaN, perMs: 1000 } }],
    ['rateLimit.max', '10001 (above the tokens)', { rateLimit: { max: 10_001, perMs: 1000 } }],
    ['rateLimit.perMs', '-5', { rateLimit: { max: 1, perMs: -5 } }],
    ['rateLimit.perMs', 'Infinity', { rateLimit: { max: 1, perMs: Number.POSITIVE_INFINITY } }],
  ];

  it.each(invalid)(
    '@JobHandler %s = %s fails the bootstrap with InvalidOptionError',
    async (option, _value, options) => {
      @Injectable()
      class Bad {
        @JobHandler('bad.limit', options)
        run() {}
      }
      const failure = await createJobsTestApp({ dbName: uniqueDatabaseName('limits_bad'), providers: [Bad] }).then(
        async (app) => {
          await app.close();
          return undefined;
        },
        (error: unknown) => error,
      );
      expect(failure).toBeInstanceOf(InvalidOptionError);
      expect((failure as InvalidOptionError).option).toContain(option);
    },
  );

  it.each([
    ['a number', 42],
    ['an empty string', ''],
    ['257 characters', 'g'.repeat(257)],
    ['an object', { tenant: 1 }],
  ])('enqueue with group as %s throws InvalidOptionError and stores nothing', async (_what, group) => {
    const app = await createJobsTestApp({
      dbName: uniqueDatabaseName('limits_bad_group'),
      providers: [SlotHandlers],
      options: { worker: false },
    });
    try {
      await expect(app.jobs.enqueue('free', {}, { group } as never)).rejects.toThrow(InvalidOptionError);
      await expect(app.jobs.enqueueMany([{ name: 'free', options: { group } as never }])).rejects.toThrow(
        InvalidOptionError,
      );
      expect((await app.jobs.stats()).pending).toBe(0);
    } finally {
      await app.close();
    }
  });

  it('a 256-character group is stored and listed', async () => {
    const app = await createJobsTestApp({
      dbName: uniqueDatabaseName('limits_group_ok'),
      providers: [SlotHandlers],
      options: { worker: false },
    });
    try {
      const job = await app.jobs.enqueue('free', {}, { group: 'g'.repeat(256) });
      expect(job.group).toBe('g'.repeat(256));
      expect((await app.jobs.findById(job.id))?.group).toBe('g'.repeat(256));
    } finally {
      await app.close();
    }
  });
});
