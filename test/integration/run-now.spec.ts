import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { Types } from 'mongoose';
import { type JobExecutionContext, JobHandler } from '../../lib';
import { createJobsTestApp, deferred, type JobsTestApp } from '../support/jobs-app';
import { sleep } from '../support/sleep';
import { uniqueDatabaseName } from '../support/test-database';

const calls: string[] = [];
const release = deferred();

@Injectable()
class RunNowHandlers {
  @JobHandler('now')
  now(_payload: unknown, ctx: JobExecutionContext) {
    calls.push(ctx.jobId);
  }

  @JobHandler('slow-now')
  async slow(_payload: unknown, ctx: JobExecutionContext) {
    calls.push(ctx.jobId);
    await release.promise;
  }
}

describe('JobsService.runNow', () => {
  let app: JobsTestApp;

  beforeAll(async () => {
    // worker: false — only runNow runs jobs here, so outcomes are deterministic.
    app = await createJobsTestApp({
      dbName: uniqueDatabaseName('run_now'),
      options: { worker: false },
      providers: [RunNowHandlers],
    });
  });
  afterAll(async () => {
    release.resolve();
    await app.close();
  });

  it('executes a due pending job in this process and returns its final row', async () => {
    const job = await app.jobs.enqueue('now', {});
    const outcome = await app.jobs.runNow(job.id);
    expect(outcome).toMatchObject({ kind: 'executed', job: { id: job.id, status: 'completed', fencingToken: 1 } });
    expect(calls).toEqual([job.id]);
  });

  it('answers not_found for unknown and malformed ids', async () => {
    expect(await app.jobs.runNow('0123456789abcdef01234567')).toEqual({ kind: 'not_found' });
    expect(await app.jobs.runNow('not-an-id')).toEqual({ kind: 'not_found' });
    expect(await app.jobs.runNow({ $ne: null } as unknown as string)).toEqual({ kind: 'not_found' });
  });

  it('answers conflict(not_due) for a future job and conflict(terminal) for a finished one', async () => {
    const future = await app.jobs.enqueue('now', {}, { delayMs: 60_000 });
    expect(await app.jobs.runNow(future.id)).toMatchObject({
      kind: 'conflict',
      reason: 'not_due',
      job: { status: 'pending' },
    });
    await app.jobs.cancel(future.id);
    expect(await app.jobs.runNow(future.id)).toMatchObject({
      kind: 'conflict',
      reason: 'terminal',
      job: { status: 'cancelled' },
    });
  });

  it('runs a job once when two runNow calls race: one executed, one conflict(locked)', async () => {
    const job = await app.jobs.enqueue('slow-now', {});
    const before = calls.length;
    const first = app.jobs.runNow(job.id);
    const second = app.jobs.runNow(job.id);
    const loser = await Promise.race([first, second]);
    expect(loser).toMatchObject({ kind: 'conflict', reason: 'locked', job: { status: 'running' } });
    release.resolve();
    const outcomes = await Promise.all([first, second]);
    expect(outcomes.map((o) => o.kind).sort()).toEqual(['conflict', 'executed']);
    expect(outcomes.find((o) => o.kind === 'executed')).toMatchObject({ job: { status: 'completed' } });
    expect(calls.length - before).toBe(1);
  });

  /** Turns a job into the row of a worker that died mid-attempt: running, someone else's lock, lease over. */
  const abandon = (id: string, fields: Record<string, unknown> = {}) =>
    app.connection.collection('jobs').updateOne(
      { _id: new Types.ObjectId(id) },
      {
        $set: {
          status: 'running',
          lockedBy: 'crashed-worker#1',
          lockedUntil: new Date(Date.now() - 1000),
          fencingToken: 1,
          ...fields,
        },
      },
    );

  it('takes over a running job whose lease ran out, counting the lost attempt, and runs it', async () => {
    const job = await app.jobs.enqueue('now', {}, { maxAttempts: 3 });
    await abandon(job.id);
    const outcome = await app.jobs.runNow(job.id);
    expect(outcome).toMatchObject({
      kind: 'executed',
      job: { status: 'completed', attemptCount: 1, fencingToken: 2, attempts: [{ errorClass: 'LeaseExpired' }] },
    });
    expect(calls.at(-1)).toBe(job.id);
  });

  it('dead-letters a running job whose lost attempt was its last, without running the handler', async () => {
    const job = await app.jobs.enqueue('now', {}, { maxAttempts: 2 });
    await abandon(job.id, { attemptCount: 1 });
    const before = calls.length;
    const outcome = await app.jobs.runNow(job.id);
    expect(outcome).toMatchObject({
      kind: 'dead_lettered',
      job: { status: 'dead', attemptCount: 2, lockedBy: null, attempts: [{ errorClass: 'LeaseExpired' }] },
    });
    expect(calls.length).toBe(before);
  });

  it('answers conflict(locked) for a running job whose lease is still live, and leaves it alone', async () => {
    const job = await app.jobs.enqueue('now', {});
    await abandon(job.id, { lockedUntil: new Date(Date.now() + 60_000) });
    expect(await app.jobs.runNow(job.id)).toMatchObject({
      kind: 'conflict',
      reason: 'locked',
      job: { status: 'running', lockedBy: 'crashed-worker#1', fencingToken: 1, attemptCount: 0 },
    });
  });

  it('answers conflict(no_handler) for a job no handler in this process runs, and leaves it pending', async () => {
    const job = await app.jobs.enqueue('elsewhere', {}, { strict: false });
    expect(await app.jobs.runNow(job.id)).toMatchObject({
      kind: 'conflict',
      reason: 'no_handler',
      job: { status: 'pending', fencingToken: 0, lockedBy: null, lastError: null },
    });
  });

  it('answers not_started, without calling the handler, when the claim comes back after its own lease ended', async () => {
    const shortLease = await createJobsTestApp({
      dbName: uniqueDatabaseName('run_now_late'),
      options: { worker: false, leaseMs: 200 },
      providers: [RunNowHandlers],
    });
    try {
      const job = await shortLease.jobs.enqueue('now', {});
      const takeById = shortLease.stores.claim.takeById.bind(shortLease.stores.claim);
      shortLease.stores.claim.takeById = async (source, ...args) => {
        const claimed = await takeById(source, ...args);
        if (source === 'pending') await sleep(300); // the answer arrives after lockedUntil
        return claimed;
      };
      const before = calls.length;
      const outcome = await shortLease.jobs.runNow(job.id);
      expect(outcome).toMatchObject({ kind: 'not_started', job: { id: job.id } });
      expect(outcome.kind === 'not_started' && outcome.reason).toMatch(/lease/i);
      expect(calls.length).toBe(before);
    } finally {
      await shortLease.close();
    }
  });
});
