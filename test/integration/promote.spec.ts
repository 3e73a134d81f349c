import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { ObjectId } from 'bson';
import { InvalidJobIdError, type JobExecutionContext, JobHandler } from '../../lib';
import { createJobsTestApp, type JobsTestApp, waitFor } from '../support/jobs-app';
import { storedJobRow } from '../support/stored-job-row';
import { uniqueDatabaseName } from '../support/test-database';

/** Handler calls per job id, and when each started. */
const started = new Map<string, Date>();

@Injectable()
class Handlers {
  @JobHandler('promote.plain')
  plain(_payload: unknown, ctx: JobExecutionContext) {
    started.set(ctx.jobId, new Date());
  }
}

/** `JobsService.promote`: a delayed pending job made due now, and only that. */
describe('promote', () => {
  let app: JobsTestApp;

  beforeAll(async () => {
    app = await createJobsTestApp({
      dbName: uniqueDatabaseName('promote'),
      options: { pollIntervalMs: 20 },
      providers: [Handlers],
    });
  });
  afterAll(() => app?.close());

  it('makes a delayed job due now: the next claim runs it, an hour early', async () => {
    const job = await app.jobs.enqueue('promote.plain', {}, { delayMs: 3_600_000 });
    const before = new Date();
    const promoted = await app.jobs.promote(job.id);
    expect(promoted).toMatchObject({ id: job.id, status: 'pending' });
    expect(promoted?.runAt.getTime()).toBeLessThanOrEqual(Date.now());
    expect(promoted?.runAt.getTime()).toBeGreaterThanOrEqual(before.getTime());
    await waitFor(async () => (await app.jobs.findById(job.id))?.status === 'completed', 'the promoted job to run');
    expect(started.get(job.id)?.getTime()).toBeLessThan(job.runAt.getTime());
  });

  it('leaves a job that is not pending, or due already, as it is', async () => {
    const due = await app.jobs.enqueue('promote.plain', {}, { runAt: new Date(Date.now() - 60_000), priority: -1 });
    // A worker may take it meanwhile: whatever it is now, promote does not move its runAt.
    const again = await app.jobs.promote(due.id);
    expect(again?.runAt).toEqual(due.runAt);
    await waitFor(async () => (await app.jobs.findById(due.id))?.status === 'completed', 'the due job to run');
    const finished = await app.jobs.findById(due.id);
    expect(await app.jobs.promote(due.id)).toEqual(finished);
    const cancelled = await app.jobs.enqueue('promote.plain', {}, { delayMs: 3_600_000 });
    await app.jobs.cancel(cancelled.id);
    expect(await app.jobs.promote(cancelled.id)).toMatchObject({ status: 'cancelled', runAt: cancelled.runAt });
  });

  it('never moves a retried job before the settle window of its cancelled run', async () => {
    // As a retry after a cancel while running leaves a row: pending, due at the cancelled run's deadline, which stays.
    const settleUntil = new Date(Date.now() + 60_000);
    const job = await app.jobs.enqueue('promote.plain', {}, { delayMs: 3_600_000 });
    await app.connection
      .collection('jobs')
      .updateOne({ _id: new ObjectId(job.id) }, { $set: { lockedUntil: settleUntil } });
    const promoted = await app.jobs.promote(job.id);
    expect(promoted).toMatchObject({ status: 'pending', runAt: settleUntil });
    expect(started.has(job.id)).toBe(false);
    // And a second promote finds nothing to move.
    expect((await app.jobs.promote(job.id))?.runAt).toEqual(settleUntil);
  });

  it("leaves a cron tick's row at its tick, and gives a row whose runAt is no date one (it was never due)", async () => {
    const tick = new Date(Date.now() + 3_600_000);
    const rows = app.connection.collection('jobs');
    const { insertedId: tickId } = await rows.insertOne(
      storedJobRow({ name: 'promote.tick', status: 'pending', runAt: tick, scheduleKey: `cron:promote.tick:${+tick}` }),
    );
    expect((await app.jobs.promote(tickId.toHexString()))?.runAt).toEqual(tick);
    const { insertedId: foreignId } = await rows.insertOne(
      storedJobRow({ name: 'promote.foreign', status: 'pending', runAt: null }),
    );
    const before = Date.now();
    const promoted = await app.jobs.promote(foreignId.toHexString());
    expect(promoted?.runAt).toBeInstanceOf(Date);
    expect(promoted?.runAt.getTime()).toBeGreaterThanOrEqual(before);
  });

  it('answers null for no such job and refuses an invalid id with InvalidJobIdError', async () => {
    expect(await app.jobs.promote(new ObjectId().toHexString())).toBeNull();
    await expect(app.jobs.promote('not-an-id')).rejects.toBeInstanceOf(InvalidJobIdError);
  });
});
