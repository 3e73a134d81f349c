import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { Injectable, Logger } from '@nestjs/common';
import { Types } from 'mongoose';
import { type JobExecutionContext, JobHandler } from '../../lib';
import { JobRunner } from '../../lib/worker/job-runner.service';
import { createJobsTestApp, deferred, type JobsTestApp, waitFor } from '../support/jobs-app';
import { sleep } from '../support/sleep';
import { uniqueDatabaseName } from '../support/test-database';

/** Every handler start and end, so a test can see overlapping executions of one job. */
const runs: { jobId: string; token: number; startedAt: number; endedAt?: number }[] = [];
let live = 0;
let maxLive = 0;
let secondRun = deferred();

function track<T>(ctx: JobExecutionContext, work: () => Promise<T>): Promise<T> {
  const run: (typeof runs)[number] = { jobId: ctx.jobId, token: ctx.fencingToken, startedAt: Date.now() };
  runs.push(run);
  live += 1;
  maxLive = Math.max(maxLive, live);
  return work().finally(() => {
    live -= 1;
    run.endedAt = Date.now();
  });
}

@Injectable()
class StubbornHandlers {
  /** Ignores its signal: keeps going for `ms` after a 150 ms timeout, then fails on its own. */
  @JobHandler('stubborn.timeout', { timeoutMs: 150, maxAttempts: 3, backoff: { baseMs: 10, maxMs: 20 } })
  timeout(payload: { ms: number }, ctx: JobExecutionContext) {
    return track(ctx, async () => {
      await sleep(payload.ms);
      throw new Error('finished late');
    });
  }

  /** Ignores its signal for far longer than one lease after a timeout. */
  @JobHandler('stubborn.forever', { timeoutMs: 100, maxAttempts: 3, backoff: { baseMs: 10, maxMs: 20 } })
  forever(payload: { ms: number }, ctx: JobExecutionContext) {
    return track(ctx, () => sleep(ctx.fencingToken === 1 ? payload.ms : 10));
  }

  /** Ignores its timeout abort past the settle wait, but finishes before its lease runs out. */
  @JobHandler('stubborn.late', { timeoutMs: 100 })
  late(payload: { ms: number }, ctx: JobExecutionContext) {
    return track(ctx, () => sleep(payload.ms));
  }

  /** The first claim ignores its signal for `ms`; the second waits for the test. */
  @JobHandler('stubborn.twice')
  twice(payload: { ms: number }, ctx: JobExecutionContext) {
    return track(ctx, () => (ctx.fencingToken === 1 ? sleep(payload.ms) : secondRun.promise));
  }
}

describe('one live owner per job', () => {
  const apps: JobsTestApp[] = [];
  const boot = async (dbName: string, options: object) => {
    const app = await createJobsTestApp({
      dbName,
      options: { pollIntervalMs: 20, ...options },
      providers: [StubbornHandlers],
    });
    apps.push(app);
    return app;
  };

  beforeEach(() => {
    secondRun = deferred();
    runs.length = 0;
    live = 0;
    maxLive = 0;
  });
  afterEach(async () => {
    secondRun.resolve();
    await Promise.all(apps.splice(0).map((app) => app.close()));
    jest.restoreAllMocks();
  });

  it('does not schedule a timed-out attempt’s retry until its handler has settled', async () => {
    const app = await boot(uniqueDatabaseName('owner_timeout'), { leaseMs: 3_000 });
    const job = await app.jobs.enqueue('stubborn.timeout', { ms: 700 });
    await waitFor(async () => (await app.jobs.findById(job.id))?.status === 'dead', 'the job to die', 15_000);
    expect(runs).toHaveLength(3);
    expect(maxLive).toBe(1);
    for (let i = 1; i < runs.length; i += 1) {
      expect(runs[i].startedAt).toBeGreaterThanOrEqual(runs[i - 1].endedAt ?? Number.POSITIVE_INFINITY);
    }
    // What each attempt did is recorded: it failed on its own, after its timeout.
    const row = await app.jobs.findById(job.id);
    expect(row?.attempts.map((a) => a.error)).toEqual(['finished late', 'finished late', 'finished late']);
  });

  it('logs a handler that ignores its abort, stops renewing, and lets the row be reclaimed only after the lease', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn');
    const app = await boot(uniqueDatabaseName('owner_deaf'), { leaseMs: 600 });
    const job = await app.jobs.enqueue('stubborn.forever', { ms: 4_000 });
    await waitFor(() => runs.length === 2, 'the job to be taken over', 10_000);
    const [first, second] = runs;
    expect(first.endedAt).toBeUndefined(); // the first handler still runs: it is only abandoned
    // Abort at 100 ms, then one lease (600 ms) of waiting while renewing, then the lease must run out: the last
    // renewal before that wait ended (at 400 ms or later) keeps the row until 1000 ms or later.
    expect(second.startedAt - first.startedAt).toBeGreaterThanOrEqual(1_000);
    const messages = warn.mock.calls.map((call) => String(call[0]));
    expect(messages.some((m) => m.includes(job.id) && m.includes('ignor'))).toBe(true);
    await waitFor(async () => (await app.jobs.findById(job.id))?.status === 'completed', 'the second run');
    const row = await app.jobs.findById(job.id);
    expect(row?.attempts.map((a) => a.errorClass)).toEqual(['LeaseExpired']);
  });

  it('writes what a handler did when it settles after the settle wait but before its unrenewed lease runs out', async () => {
    const app = await boot(uniqueDatabaseName('owner_late'), { leaseMs: 600 });
    // Abort at 100 ms, settle wait until 700 ms, renewals stop; the lease (renewed at 400 ms or later) lasts past
    // 1000 ms, and the handler finishes at 850 ms: its success is still ours to write.
    const job = await app.jobs.enqueue('stubborn.late', { ms: 850 });
    await waitFor(async () => (await app.jobs.findById(job.id))?.status === 'completed', 'completed', 5_000);
    expect(await app.jobs.findById(job.id)).toMatchObject({ attemptCount: 0, fencingToken: 1, attempts: [] });
    expect(runs).toHaveLength(1);
  });

  it('keys executions by claim: a second claim of a job in the same process is tracked, awaited and finalized', async () => {
    const dbName = uniqueDatabaseName('owner_twice');
    const worker = await boot(dbName, { leaseMs: 1_000, concurrency: 4 });
    const admin = await boot(dbName, { worker: false });
    const runner = worker.get(JobRunner);
    const job = await worker.jobs.enqueue('stubborn.twice', { ms: 2_500 });
    await waitFor(() => runs.length === 1, 'the first run');
    await admin.jobs.cancel(job.id);
    // A cancel keeps the job from being claimed again while the cancelled handler may run. An older version's cancel
    // did not raise the deadline, and its retry could be claimed while the first run was still tracked here.
    await worker.connection
      .collection('jobs')
      .updateOne({ _id: new Types.ObjectId(job.id) }, { $set: { lockedUntil: new Date() } });
    await admin.jobs.retry(job.id);
    await waitFor(() => runs.length === 2, 'the second claim', 5_000);
    expect(runs[0].endedAt).toBeUndefined();
    expect(runner.pollState().running).toBe(2);
    await waitFor(() => runs[0].endedAt !== undefined, 'the first run to end', 5_000);
    // Its slot is released once its outcome is written (a round trip, slow on a loaded machine): wait for that, then
    // the first attempt ending must not have forgotten the second one.
    await waitFor(() => runner.pollState().running < 2, "the first run's slot to be released", 5_000);
    expect(runner.pollState().running).toBe(1);
    secondRun.resolve();
    await waitFor(async () => (await worker.jobs.findById(job.id))?.status === 'completed', 'the second run to land');
    expect(runner.pollState().running).toBe(0);
    expect(maxLive).toBe(2);
  });
});
