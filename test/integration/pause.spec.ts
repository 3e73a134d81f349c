import { afterEach, describe, expect, it } from '@jest/globals';
import { Injectable, type Provider } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { Types } from 'mongoose';
import {
  DrainTimeoutError,
  InvalidOptionError,
  type JobExecutionContext,
  JobHandler,
  type NamePauseEvent,
} from '../../lib';
import { MAX_PAUSED_NAMES } from '../../lib/model/jobs.constants';
import { createJobsTestApp, deferred, type JobsTestApp, waitFor } from '../support/jobs-app';
import { uniqueDatabaseName } from '../support/test-database';

const POLL_MS = 30;
/** Handler calls, by job id. */
const calls: string[] = [];
let release = deferred();

@Injectable()
class PauseHandlers {
  @JobHandler('mail')
  async mail(_payload: unknown, ctx: JobExecutionContext) {
    calls.push(ctx.jobId);
  }

  /** The control name: a job of it completing proves the worker polled and claimed after the paused jobs were due. */
  @JobHandler('control')
  async control(_payload: unknown, ctx: JobExecutionContext) {
    calls.push(ctx.jobId);
  }

  /** A name with a fleet-wide limit: claimed on its own path (slots), and by runNow through it too. */
  @JobHandler('limited', { globalConcurrency: 1 })
  async limited(_payload: unknown, ctx: JobExecutionContext) {
    calls.push(ctx.jobId);
  }

  /** Holds until the test releases it. */
  @JobHandler('held')
  async held(_payload: unknown, ctx: JobExecutionContext) {
    calls.push(ctx.jobId);
    await release.promise;
  }
}

/** A cron name: its ticks keep being enqueued while it is paused. */
@Injectable()
class TickHandlers {
  @JobHandler('tick', { cron: '* * * * * *' })
  async tick(_payload: unknown, ctx: JobExecutionContext) {
    calls.push(ctx.jobId);
  }
}

describe('pause and resume a name, fleet-wide', () => {
  const apps: JobsTestApp[] = [];
  afterEach(async () => {
    release.resolve();
    await Promise.all(apps.splice(0).map((app) => app.close()));
    calls.length = 0;
    release = deferred();
  });

  const start = async (dbName: string, options = {}, providers: Provider[] = [PauseHandlers]) => {
    const imports = providers.includes(TickHandlers) ? [ScheduleModule.forRoot()] : [];
    const app = await createJobsTestApp({
      dbName,
      options: { pollIntervalMs: POLL_MS, ...options },
      providers,
      imports,
    });
    apps.push(app);
    return app;
  };

  /** Enqueues a control job on `app` and waits until it completed: every job due before it had its chance. */
  const controlRan = async (app: JobsTestApp) => {
    const control = await app.jobs.enqueue('control', {});
    await waitFor(async () => (await app.jobs.findById(control.id))?.status === 'completed', 'the control job');
  };

  it('a pause made by one app is honoured by a worker of another; resume runs the jobs', async () => {
    const dbName = uniqueDatabaseName('pause_two');
    const producer = await start(dbName, { worker: false });
    const worker = await start(dbName, { workerId: 'w' });
    const seen: NamePauseEvent[] = [];
    worker.jobs.pauses$.subscribe((event) => seen.push(event));

    await producer.jobs.pause('mail');
    await waitFor(() => seen.some((e) => e.type === 'paused' && e.name === 'mail'), 'the worker to see the pause');
    const jobs = await Promise.all([1, 2, 3].map(() => producer.jobs.enqueue('mail', {})));
    await controlRan(worker);
    for (const job of jobs) expect(await producer.jobs.findById(job.id)).toMatchObject({ status: 'pending' });
    expect(calls.filter((id) => jobs.some((job) => job.id === id))).toEqual([]);

    // Seen everywhere an operator looks.
    expect(await producer.jobs.pausedNames()).toEqual([{ name: 'mail', pausedAt: expect.any(Date) }]);
    expect((await worker.jobs.workerStatus()).paused).toEqual(['mail']);
    await waitFor(async () => (await producer.jobs.workers())[0]?.paused?.includes('mail') === true, 'presence');
    const metrics = await producer.jobs.metrics({ windowMs: 60_000, bucketMs: 60_000 });
    expect(metrics.paused).toEqual(['mail']);
    expect(metrics.names.find((n) => n.name === 'mail')).toMatchObject({ paused: true, counts: { pending: 3 } });
    expect(metrics.names.find((n) => n.name === 'control')).toMatchObject({ paused: false });

    expect(await producer.jobs.resume('mail')).toBe(true);
    for (const job of jobs) {
      await waitFor(async () => (await producer.jobs.findById(job.id))?.status === 'completed', 'the resumed jobs');
    }
    await waitFor(() => seen.some((e) => e.type === 'resumed' && e.name === 'mail'), 'the worker to see the resume');
    expect(seen.map((e) => `${e.type} ${e.name}`)).toEqual(['paused mail', 'resumed mail']);
    expect(await producer.jobs.resume('mail')).toBe(false);
  });

  it('the process that pauses stops claiming at once, and emits paused and resumed itself', async () => {
    const app = await start(uniqueDatabaseName('pause_local'));
    const seen: string[] = [];
    app.jobs.pauses$.subscribe((event) => seen.push(`${event.type} ${event.name}`));
    await app.jobs.pause('mail');
    expect(seen).toEqual(['paused mail']); // before pause() returned
    const job = await app.jobs.enqueue('mail', {});
    await controlRan(app);
    expect(await app.jobs.findById(job.id)).toMatchObject({ status: 'pending' });
    await app.jobs.pause('mail'); // idempotent: no second event, one document
    expect(seen).toEqual(['paused mail']);
    expect(await app.connection.collection('jobs_paused').countDocuments()).toBe(1);
    await app.jobs.resume('mail');
    expect(seen).toEqual(['paused mail', 'resumed mail']);
    await waitFor(async () => (await app.jobs.findById(job.id))?.status === 'completed', 'the resumed job');
  });

  it('lets a running job of a paused name finish, and runNow answers paused', async () => {
    const app = await start(uniqueDatabaseName('pause_running'));
    const held = await app.jobs.enqueue('held', {});
    await waitFor(() => calls.includes(held.id), 'the held job to start');
    await app.jobs.pause('held');
    await app.jobs.pause('mail');
    release.resolve();
    await waitFor(async () => (await app.jobs.findById(held.id))?.status === 'completed', 'the running job to finish');

    const waiting = await app.jobs.enqueue('mail', {});
    expect(await app.jobs.runNow(waiting.id)).toMatchObject({ kind: 'conflict', reason: 'paused' });
    expect(await app.jobs.findById(waiting.id)).toMatchObject({ status: 'pending', attemptCount: 0 });
    expect(calls).not.toContain(waiting.id);
    await app.jobs.resume('mail');
    await waitFor(async () => (await app.jobs.findById(waiting.id))?.status === 'completed', 'the resumed job');
  });

  it('runNow reads the pause from the database, not from its last read', async () => {
    const dbName = uniqueDatabaseName('pause_runnow');
    // A worker-less app never reads the pauses on its own: runNow must read them.
    const runner = await start(dbName, { worker: false });
    const other = await start(dbName, { worker: false });
    const job = await runner.jobs.enqueue('mail', {});
    await other.jobs.pause('mail');
    expect(await runner.jobs.runNow(job.id)).toMatchObject({ kind: 'conflict', reason: 'paused' });
    await other.jobs.resume('mail');
    expect(await runner.jobs.runNow(job.id)).toMatchObject({ kind: 'executed', job: { status: 'completed' } });
  });

  it('does not reclaim an expired lease of a paused name until it resumes (a reclaim is a start)', async () => {
    const app = await start(uniqueDatabaseName('pause_reclaim'));
    await app.jobs.pause('mail');
    const job = await app.jobs.enqueue('mail', {});
    // A worker that died holding the job: running, its lease run out.
    const past = new Date(Date.now() - 60_000);
    await app.connection
      .collection('jobs')
      .updateOne(
        { _id: new Types.ObjectId(job.id) },
        { $set: { status: 'running', lockedBy: 'dead#1', lockedUntil: past, fencingToken: 1 } },
      );
    await controlRan(app);
    await controlRan(app); // a second poll interval: the reclaim search runs at most once per interval
    expect(await app.jobs.findById(job.id)).toMatchObject({ status: 'running', lockedBy: 'dead#1', attemptCount: 0 });
    await app.jobs.resume('mail');
    await waitFor(async () => (await app.jobs.findById(job.id))?.status === 'completed', 'the reclaimed job');
    expect(await app.jobs.findById(job.id)).toMatchObject({ attemptCount: 1 }); // the lost attempt, counted
    expect(calls).toContain(job.id);
  });

  it('a worker that boots while a name is paused claims none of its jobs', async () => {
    const dbName = uniqueDatabaseName('pause_boot');
    const producer = await start(dbName, { worker: false });
    await producer.jobs.pause('mail');
    const job = await producer.jobs.enqueue('mail', {});
    const worker = await start(dbName);
    await controlRan(worker);
    expect(await producer.jobs.findById(job.id)).toMatchObject({ status: 'pending' });
  });

  it('hands back a claim that was in flight when the pause was made: the handler never starts', async () => {
    const app = await start(uniqueDatabaseName('pause_in_flight'));
    // The next pending claim's answer is held until the pause has returned.
    const answered = deferred();
    const heldClaim = deferred();
    const take = app.stores.claim.take.bind(app.stores.claim);
    app.stores.claim.take = async (source, ...args) => {
      const taken = await take(source, ...args);
      if (source === 'pending' && taken) {
        heldClaim.resolve();
        await answered.promise;
      }
      return taken;
    };
    const job = await app.jobs.enqueue('mail', {});
    await heldClaim.promise; // the row is running under this worker's claim
    await app.jobs.pause('mail');
    answered.resolve();
    await waitFor(async () => (await app.jobs.findById(job.id))?.status === 'pending', 'the claim handed back');
    expect(await app.jobs.findById(job.id)).toMatchObject({ status: 'pending', attemptCount: 0 });
    expect(calls).not.toContain(job.id);
    await app.jobs.resume('mail');
    await waitFor(async () => (await app.jobs.findById(job.id))?.status === 'completed', 'the resumed job');
  });

  it('claims none of 5 paused jobs beside 20 due ones, in batches (concurrency 8)', async () => {
    const app = await start(uniqueDatabaseName('pause_batch'), { concurrency: 8 });
    await app.jobs.pause('mail');
    const paused = await app.jobs.enqueueMany(Array.from({ length: 5 }, () => ({ name: 'mail', payload: {} })));
    const due = await app.jobs.enqueueMany(Array.from({ length: 20 }, () => ({ name: 'control', payload: {} })));
    for (const job of due) {
      await waitFor(async () => (await app.jobs.findById(job.id))?.status === 'completed', 'the due jobs');
    }
    for (const job of paused) expect(await app.jobs.findById(job.id)).toMatchObject({ status: 'pending' });
    expect(calls.filter((id) => paused.some((job) => job.id === id))).toEqual([]);
  });

  it('a paused name with a fleet-wide limit is claimed by neither the poll loop nor runNow', async () => {
    const app = await start(uniqueDatabaseName('pause_limited'));
    await app.jobs.pause('limited');
    const job = await app.jobs.enqueue('limited', {});
    await controlRan(app);
    expect(await app.jobs.findById(job.id)).toMatchObject({ status: 'pending' });
    expect(await app.jobs.runNow(job.id)).toMatchObject({ kind: 'conflict', reason: 'paused' });
    await app.jobs.resume('limited');
    await waitFor(async () => (await app.jobs.findById(job.id))?.status === 'completed', 'the resumed job');
  });

  it('runNow does not take over an expired lease of a paused name', async () => {
    const app = await start(uniqueDatabaseName('pause_runnow_expired'), { worker: false });
    await app.jobs.pause('mail');
    const job = await app.jobs.enqueue('mail', {});
    const expired = {
      status: 'running',
      lockedBy: 'dead#1',
      lockedUntil: new Date(Date.now() - 60_000),
      fencingToken: 1,
    };
    await app.connection.collection('jobs').updateOne({ _id: new Types.ObjectId(job.id) }, { $set: expired });
    expect(await app.jobs.runNow(job.id)).toMatchObject({ kind: 'conflict', reason: 'paused' });
    expect(await app.jobs.findById(job.id)).toMatchObject({ ...expired, attemptCount: 0 });
  });

  it('still enqueues the ticks of a paused cron name; they wait, and run after resume', async () => {
    const app = await start(uniqueDatabaseName('pause_cron'), {}, [PauseHandlers, TickHandlers]);
    await app.jobs.pause('tick');
    const pausedAt = Date.now();
    const rows = app.connection.collection('jobs');
    const tickAfterPause = { name: 'tick', createdAt: { $gt: new Date(pausedAt) } };
    await waitFor(async () => (await rows.countDocuments(tickAfterPause)) >= 2, 'two ticks enqueued while paused');
    await controlRan(app);
    const ticks = await rows.find(tickAfterPause).toArray();
    expect(ticks.map((tick) => tick.status)).toEqual(ticks.map(() => 'pending'));
    expect(calls.filter((id) => ticks.some((tick) => String(tick._id) === id))).toEqual([]);
    await app.jobs.resume('tick');
    const first = String(ticks[0]._id);
    await waitFor(async () => (await app.jobs.findById(first))?.status === 'completed', 'a tick to run after resume');
  });

  it('drain names the paused names it waited on', async () => {
    const app = await start(uniqueDatabaseName('pause_drain'));
    await app.jobs.pause('mail');
    await app.jobs.enqueue('mail', {});
    const error = await app.jobs.drain({ names: ['mail'], timeoutMs: 200 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DrainTimeoutError);
    expect((error as DrainTimeoutError).left).toEqual([expect.objectContaining({ name: 'mail', paused: true })]);
    expect((error as DrainTimeoutError).message).toContain('paused: nothing claims them until resume("mail")');
  });

  it('rejects a bad name, and a pause beyond the cap, writing nothing', async () => {
    const app = await start(uniqueDatabaseName('pause_bad'), { worker: false });
    for (const bad of ['', 'x'.repeat(201), 42, null, undefined]) {
      await expect(app.jobs.pause(bad as string)).rejects.toBeInstanceOf(InvalidOptionError);
      await expect(app.jobs.resume(bad as string)).rejects.toBeInstanceOf(InvalidOptionError);
    }
    expect(await app.connection.collection('jobs_paused').countDocuments()).toBe(0);
    const full = Array.from({ length: MAX_PAUSED_NAMES }, (_, i) => ({ _id: `n${i}`, pausedAt: new Date() }));
    await app.connection.collection<{ _id: string; pausedAt: Date }>('jobs_paused').insertMany(full);
    await expect(app.jobs.pause('one-more')).rejects.toThrow(`at most ${MAX_PAUSED_NAMES} names can be paused`);
    await app.jobs.pause('n7'); // already paused: no new document, no refusal
    expect(await app.connection.collection('jobs_paused').countDocuments()).toBe(MAX_PAUSED_NAMES);
  });
});
