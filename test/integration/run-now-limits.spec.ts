import { afterEach, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { ObjectId } from 'mongodb';
import { type JobExecutionContext, JobHandler } from '../../lib';
import { createJobsTestApp, deferred, type JobsTestApp, waitFor } from '../support/jobs-app';
import { storedJobRow } from '../support/stored-job-row';
import { connectTestClient, uniqueDatabaseName } from '../support/test-database';

const calls: string[] = [];
let active = 0;
let maxActive = 0;
let gate = deferred();
let aborted = deferred();

@Injectable()
class LimitHandlers {
  /** At most one at a time in a process: e.g. a handler that must not overlap with itself. */
  @JobHandler('limited', { concurrency: 1 })
  async limited(_payload: unknown, ctx: JobExecutionContext) {
    calls.push(ctx.jobId);
    active += 1;
    maxActive = Math.max(maxActive, active);
    try {
      await gate.promise;
    } finally {
      active -= 1;
    }
  }

  /** Ignores its signal until the test lets it go. */
  @JobHandler('stubborn')
  async stubborn(_payload: unknown, ctx: JobExecutionContext) {
    calls.push(ctx.jobId);
    ctx.signal.addEventListener('abort', () => aborted.resolve());
    await gate.promise;
  }
}

describe('runNow and the runner’s limits', () => {
  const apps: JobsTestApp[] = [];
  const dbName = uniqueDatabaseName('run_now_limits');

  afterEach(async () => {
    gate.resolve();
    await Promise.all(apps.splice(0).map((app) => app.close().catch(() => undefined)));
    calls.length = 0;
    active = 0;
    maxActive = 0;
    gate = deferred();
    aborted = deferred();
  });

  it('does not run a second execution of a concurrency-1 handler through runNow', async () => {
    const app = await createJobsTestApp({ dbName, providers: [LimitHandlers] });
    apps.push(app);
    const first = await app.jobs.enqueue('limited');
    await waitFor(() => calls.length === 1, 'the worker to start the first job');
    const second = await app.jobs.enqueue('limited');
    let answered = false;
    const outcome = app.jobs.runNow(second.id).finally(() => {
      answered = true;
    });
    await waitFor(() => answered || calls.length === 2, 'runNow to answer or start the second job');
    gate.resolve();
    expect(await outcome).toMatchObject({ kind: 'not_started', reason: expect.stringMatching(/concurrency/) });
    expect({ first: first.id, maxActive }).toEqual({ first: first.id, maxActive: 1 });
    // Handed back untouched: the worker runs it once the first one is done.
    await waitFor(() => calls.length === 2, 'the worker to run the second job');
  });

  it('does not leave a job that finished running when runNow started it during shutdown', async () => {
    const client = await connectTestClient();
    try {
      const app = await createJobsTestApp({
        dbName,
        // The poll loop must not claim the second job before runNow does: no poll again within the test, no change
        // stream, and the row written behind the worker's back (a local enqueue would wake the loop).
        options: { shutdownGraceMs: 100, leaseMs: 30_000, pollIntervalMs: 60_000, changeStream: false },
        providers: [LimitHandlers],
      });
      apps.push(app);
      await app.jobs.enqueue('stubborn');
      await waitFor(() => calls.length === 1, 'the worker to start the stubborn job');
      const inserted = await client
        .db(dbName)
        .collection('jobs')
        .insertOne(storedJobRow({ name: 'stubborn', status: 'pending', runAt: new Date(), finishedAt: undefined }));
      const late = { id: inserted.insertedId.toHexString() };
      const closing = app.close();
      await aborted.promise; // the shutdown abort has been sent to the running handlers
      // A runNow that arrives after the shutdown abort must not start a handler shutdown will not wait for.
      const outcome = await app.jobs.runNow(late.id);
      expect(outcome).toMatchObject({ kind: 'not_started', reason: expect.stringMatching(/shutting down/) });
      await closing;
      apps.splice(apps.indexOf(app), 1);
      expect(calls).toHaveLength(1);
      const row = await client
        .db(dbName)
        .collection('jobs')
        .findOne({ _id: new ObjectId(late.id) });
      expect(row).toMatchObject({ status: 'pending', attemptCount: 0 });
    } finally {
      await client.close();
    }
  });
});
