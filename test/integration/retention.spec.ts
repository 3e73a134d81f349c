import { afterAll, afterEach, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { Injectable, Logger } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { Types } from 'mongoose';
import { InvalidOptionError, JobHandler, UnrecoverableJobError } from '../../lib';
import { JobHandlerRegistry } from '../../lib/handlers/job-handler.registry';
import { JobsCronScheduler } from '../../lib/schedule/jobs-cron.scheduler';
import { createJobsTestApp, deferred, type JobsTestApp, waitFor } from '../support/jobs-app';
import { notReached, reached, untilPreconditionReached } from '../support/precondition';
import { sleep } from '../support/sleep';
import { connectTestClient, uniqueDatabaseName } from '../support/test-database';

const HOUR_MS = 3_600_000;
/**
 * The module's retention for completed and dead rows. Long enough that a test reads a finished row before the sweeper
 * (every 100 ms) deletes it, even on a loaded machine (at 200 ms that read was missed often enough to need 20 tries);
 * short enough that waiting for a sweep costs little.
 */
const RETENTION_MS = 500;
const hold = deferred();

@Injectable()
class RetentionHandlers {
  @JobHandler('quick')
  quick() {}

  @JobHandler('kept', { retention: { completed: HOUR_MS } })
  kept() {}

  @JobHandler('brief', { retention: { completed: 1_000 } })
  brief() {}

  @JobHandler('fail', { maxAttempts: 1 })
  fail() {
    throw new UnrecoverableJobError('no');
  }

  @JobHandler('block')
  async block() {
    await hold.promise;
  }

  @JobHandler('yearly', { cron: '0 0 1 1 *' })
  yearly() {}
}

const rows = (app: JobsTestApp) => app.connection.collection('jobs');
const row = (app: JobsTestApp, id: string) => rows(app).findOne({ _id: new Types.ObjectId(id) });
const statusIs = (app: JobsTestApp, id: string, status: string) => async () =>
  (await app.jobs.findById(id))?.status === status;
const gone = (app: JobsTestApp, id: string) => async () => (await row(app, id)) === null;

/**
 * Enqueues a `name` job and returns its row as first read in `status` (the stamp is read from the same document that
 * showed the status). The sweeper may delete the row before it is read, if the test process is starved for the whole
 * retention: then the precondition did not happen, and the scenario is tried again with another job.
 */
function rowSeenIn(app: JobsTestApp, name: string, status: string) {
  return untilPreconditionReached(`a ${name} job read ${status} before the sweeper deleted it`, async () => {
    const job = await app.jobs.enqueue(name, null);
    const seen: { row?: NonNullable<Awaited<ReturnType<typeof row>>> } = {};
    await waitFor(async () => {
      const found = await row(app, job.id);
      if (found?.status === status) seen.row = found;
      return seen.row !== undefined || found === null;
    }, `job ${job.id} to be ${status} or swept`);
    return seen.row ? reached(seen.row) : notReached(`job ${job.id} swept before it was read ${status}`);
  });
}

/** Resolves once the sweeper has deleted a job completed after this call: every sweep before it has run too. */
async function sweptOnce(app: JobsTestApp): Promise<void> {
  const probe = await app.jobs.enqueue('quick', null);
  await waitFor(gone(app, probe.id), 'a sweep that deletes a probe job');
}

describe('retention', () => {
  let app: JobsTestApp;

  beforeAll(async () => {
    app = await createJobsTestApp({
      dbName: uniqueDatabaseName('retention'),
      options: { retention: { completed: RETENTION_MS, dead: RETENTION_MS, sweepIntervalMs: 100 } },
      providers: [RetentionHandlers],
      imports: [ScheduleModule.forRoot()],
    });
  });
  afterAll(async () => {
    hold.resolve();
    await app?.close();
  });

  it('deletes completed rows once their retention has passed, never pending, running or delayed ones', async () => {
    const done = await Promise.all([1, 2, 3].map(() => app.jobs.enqueue('quick', null)));
    const delayed = await app.jobs.enqueue('quick', null, { delayMs: HOUR_MS });
    const unhandled = await app.jobs.enqueue('elsewhere', null, { strict: false });
    const running = await app.jobs.enqueue('block', null);
    await waitFor(statusIs(app, running.id, 'running'), 'the blocking job to run');
    const stamped = await rowSeenIn(app, 'quick', 'completed');
    // Stamped by the write that completed it: finishedAt + the module's completed retention.
    expect(stamped?.expiresAt?.getTime()).toBe(stamped?.finishedAt.getTime() + RETENTION_MS);

    for (const job of done) await waitFor(gone(app, job.id), `completed job ${job.id} to be swept`);
    await sweptOnce(app);
    expect((await row(app, delayed.id))?.status).toBe('pending');
    expect((await row(app, unhandled.id))?.status).toBe('pending');
    expect((await row(app, running.id))?.status).toBe('running');
    expect((await row(app, running.id))?.expiresAt).toBeUndefined();
  });

  it("keeps a handler's rows for its own retention, overriding the module's", async () => {
    const kept = await app.jobs.enqueue('kept', null);
    await waitFor(statusIs(app, kept.id, 'completed'), 'completion');
    const stored = await row(app, kept.id);
    expect(stored?.expiresAt?.getTime()).toBe(stored?.finishedAt.getTime() + HOUR_MS);
    await sweptOnce(app);
    expect(await row(app, kept.id)).not.toBeNull();
  });

  it('stamps dead rows and cancelled ones (the module default for cancelled: 30 days)', async () => {
    const dead = await rowSeenIn(app, 'fail', 'dead');
    expect(dead?.expiresAt?.getTime()).toBe(dead?.finishedAt.getTime() + RETENTION_MS);

    const later = await app.jobs.enqueue('quick', null, { delayMs: HOUR_MS });
    const cancelled = await app.jobs.cancel(later.id);
    expect(cancelled?.expiresAt?.getTime()).toBe((cancelled?.finishedAt?.getTime() ?? 0) + 30 * 24 * HOUR_MS);
  });

  it('clears the expiry of a dead job that is retried, so it is not swept while pending', async () => {
    // A dead job of a name no process here handles, already past its expiry.
    const { insertedId } = await rows(app).insertOne({
      name: 'elsewhere',
      payload: null,
      status: 'dead',
      runAt: new Date(Date.now() - HOUR_MS),
      priority: 0,
      attemptCount: 1,
      maxAttempts: 1,
      attempts: [],
      fencingToken: 1,
      createdAt: new Date(Date.now() - HOUR_MS),
      updatedAt: new Date(Date.now() - HOUR_MS),
      finishedAt: new Date(Date.now() - HOUR_MS),
      expiresAt: new Date(Date.now() + 60_000),
    });
    const retried = await app.jobs.retry(insertedId.toHexString());
    expect(retried?.status).toBe('pending');
    expect(retried?.expiresAt).toBeNull();
    expect((await rows(app).findOne({ _id: insertedId }))?.expiresAt).toBeUndefined();
    await sweptOnce(app);
    expect((await rows(app).findOne({ _id: insertedId }))?.status).toBe('pending');
  });

  it('keeps a cron tick row younger than the catch-up window through sweeps and purge, whatever retention says', async () => {
    const handler = app.get(JobHandlerRegistry).get('yearly');
    if (!handler) throw new Error('handler not registered');
    const tick = new Date(Math.floor(Date.now() / 1000) * 1000 - 60_000);
    expect(await app.get(JobsCronScheduler).enqueueTick(handler, tick)).toBe(true);
    const tickRow = async () => rows(app).findOne({ name: 'yearly' });
    await waitFor(async () => (await tickRow())?.status === 'completed', 'the tick job to complete');
    // Its stamp covers the window: no sweep even reads it before the tick is a day (and a margin) old.
    expect((await tickRow())?.expiresAt?.getTime()).toBeGreaterThanOrEqual(tick.getTime() + 24 * HOUR_MS);
    await sweptOnce(app);
    expect(await tickRow()).not.toBeNull();

    const plain = await app.jobs.enqueue('kept', null);
    await waitFor(statusIs(app, plain.id, 'completed'), 'completion');
    expect(await app.jobs.purge({ status: 'completed' })).toBeGreaterThanOrEqual(1);
    expect(await row(app, plain.id)).toBeNull();
    expect(await tickRow()).not.toBeNull();
    // The tick stays exactly-once: replaying it inserts nothing.
    expect(await app.get(JobsCronScheduler).enqueueTick(handler, tick)).toBe(false);
  });

  it('never enqueues a tick older than the catch-up window', async () => {
    const handler = app.get(JobHandlerRegistry).get('yearly');
    if (!handler) throw new Error('handler not registered');
    const threeWeeksAgo = new Date(Math.floor(Date.now() / 1000) * 1000 - 21 * 24 * HOUR_MS);
    expect(await app.get(JobsCronScheduler).enqueueTick(handler, threeWeeksAgo)).toBe(false);
    expect(await rows(app).countDocuments({ name: 'yearly', runAt: threeWeeksAgo })).toBe(0);
  });
});

describe('retention: false', () => {
  let app: JobsTestApp;

  beforeAll(async () => {
    app = await createJobsTestApp({
      dbName: uniqueDatabaseName('retention_off'),
      options: { retention: false },
      providers: [RetentionHandlers],
      imports: [ScheduleModule.forRoot()],
    });
  });
  afterAll(async () => {
    hold.resolve();
    await app?.close();
  });

  it("stamps nothing, except for a handler's own retention", async () => {
    const plain = await app.jobs.enqueue('quick', null);
    const brief = await app.jobs.enqueue('brief', null);
    await waitFor(statusIs(app, plain.id, 'completed'), 'completion');
    await waitFor(statusIs(app, brief.id, 'completed'), 'completion');
    expect((await row(app, plain.id))?.expiresAt).toBeUndefined();
    const stamped = await row(app, brief.id);
    expect(stamped?.expiresAt?.getTime()).toBe(stamped?.finishedAt.getTime() + 1_000);
  });

  it('purges finished rows by status, name and finishedBefore, in any number of batches', async () => {
    await rows(app).deleteMany({});
    const early = await Promise.all([1, 2].map(() => app.jobs.enqueue('quick', null)));
    const dead = await app.jobs.enqueue('fail', null);
    for (const job of early) await waitFor(statusIs(app, job.id, 'completed'), 'completion');
    await waitFor(statusIs(app, dead.id, 'dead'), 'dead-lettering');
    const between = new Date((await app.jobs.findById(early[1].id))?.finishedAt?.getTime() ?? 0);
    await sleep(5);
    const late = await app.jobs.enqueue('quick', null);
    await waitFor(statusIs(app, late.id, 'completed'), 'completion');

    // finishedBefore is exclusive: `between` is the second early job's own finishedAt.
    expect(await app.jobs.purge({ status: 'completed', finishedBefore: new Date(between.getTime() + 1) })).toBe(2);
    expect(await row(app, late.id)).not.toBeNull();
    expect(await app.jobs.purge({ status: 'dead', name: 'quick' })).toBe(0);
    expect(await app.jobs.purge({ status: 'dead', name: 'fail' })).toBe(1);
    expect(await row(app, dead.id)).toBeNull();

    // 2,500 finished rows: deleted in bounded batches, all of them.
    const at = new Date();
    await rows(app).insertMany(
      Array.from({ length: 2_500 }, () => ({ name: 'bulk', status: 'failed', runAt: at, finishedAt: at })),
    );
    expect(await app.jobs.purge({ status: 'failed' })).toBe(2_500);
  });

  it('refuses to purge live statuses, deleting nothing', async () => {
    const pending = await app.jobs.enqueue('quick', null, { delayMs: HOUR_MS });
    for (const status of ['pending', 'running', 'bogus', undefined]) {
      await expect(app.jobs.purge({ status } as never)).rejects.toThrow(InvalidOptionError);
    }
    await expect(app.jobs.purge({ status: 'completed', name: '' })).rejects.toThrow(InvalidOptionError);
    await expect(app.jobs.purge({ status: 'completed', finishedBefore: new Date('x') })).rejects.toThrow(
      InvalidOptionError,
    );
    expect(await row(app, pending.id)).not.toBeNull();
  });

  it('refuses a misspelt or malformed purge option rather than purging more than asked, deleting nothing', async () => {
    const done = await app.jobs.enqueue('quick', null);
    await waitFor(statusIs(app, done.id, 'completed'), 'completion');
    const misspelt = [
      { status: 'completed', before: new Date(0) },
      { status: 'completed', names: 'other' },
      { status: ['completed', 'dead'] },
      { status: 'completed', name: { $ne: 'other' } },
      { status: 'completed', finishedBefore: Date.now() },
    ];
    for (const options of misspelt) {
      await expect(app.jobs.purge(options as never)).rejects.toThrow(InvalidOptionError);
    }
    expect(await row(app, done.id)).not.toBeNull();
  });

  it('deletes at most `limit` rows, and refuses a limit that is not an integer from 1 to 1,000, deleting nothing', async () => {
    await rows(app).deleteMany({});
    const at = new Date();
    await rows(app).insertMany(
      Array.from({ length: 7 }, () => ({ name: 'limited', status: 'completed', runAt: at, finishedAt: at })),
    );
    const left = () => rows(app).countDocuments({ name: 'limited' });
    for (const limit of [1_001, 1e300, 0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '1', { $gt: 0 }, null]) {
      const purge = app.jobs.purge({ status: 'completed', limit } as never);
      await expect(purge).rejects.toThrow(InvalidOptionError);
      await expect(purge).rejects.toThrow(/limit: must be an integer from 1 to 1000/);
    }
    expect(await left()).toBe(7);
    expect(await app.jobs.purge({ status: 'completed', limit: 1 })).toBe(1);
    expect(await left()).toBe(6);
    expect(await app.jobs.purge({ status: 'completed', name: 'limited', limit: 1_000 })).toBe(6);
    expect(await left()).toBe(0);
  });
});

describe('several processes sweeping one collection', () => {
  const apps: JobsTestApp[] = [];
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()));
    jest.restoreAllMocks();
  });

  it('both sweep at once without errors, until every expired row is gone, never a young tick or a pending row', async () => {
    const dbName = uniqueDatabaseName('retention_fleet');
    const problems = [jest.spyOn(Logger.prototype, 'error'), jest.spyOn(Logger.prototype, 'warn')];
    const past = new Date(Date.now() - 1_000);
    const expired = Array.from({ length: 2_500 }, (_, i) => ({
      name: 'bulk',
      status: i % 2 === 0 ? 'completed' : 'dead',
      runAt: past,
      finishedAt: past,
      expiresAt: past,
    }));
    // Rows that (wrongly) carry a passed expiry, yet must stay: a pending job, and a tick's job from a minute ago.
    const pending = { name: 'bulk', status: 'pending', runAt: new Date(Date.now() + HOUR_MS), expiresAt: past };
    const tick = { ...expired[0], name: 'ticked', scheduleKey: 'cron:ticked:x', runAt: new Date(Date.now() - 60_000) };
    const client = await connectTestClient();
    try {
      await client
        .db(dbName)
        .collection('jobs')
        .insertMany([...expired, pending, tick]);
    } finally {
      await client.close();
    }
    const options = { retention: { sweepIntervalMs: 50 } };
    apps.push(...(await Promise.all([1, 2].map(() => createJobsTestApp({ dbName, options })))));
    await waitFor(async () => (await rows(apps[0]).countDocuments({ name: 'bulk' })) === 1, 'sweeps');
    expect(
      await rows(apps[0])
        .find({}, { projection: { _id: 0, name: 1, status: 1 } })
        .toArray(),
    ).toEqual([
      { name: 'bulk', status: 'pending' },
      { name: 'ticked', status: 'completed' },
    ]);
    expect(problems.flatMap((spy) => spy.mock.calls)).toEqual([]);
  });
});
