import { afterEach, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { MongoNetworkError } from 'mongodb';
import { type JobExecutionContext, JobHandler } from '../../lib';
import { JobClaimService } from '../../lib/claim/job-claim.service';
import { LimitedClaim } from '../../lib/claim/limited-claim';
import { ShutdownDeadline } from '../../lib/model/shutdown-deadline';
import { createJobsTestApp, type JobsTestApp, waitFor } from '../support/jobs-app';
import { storedJobRow } from '../support/stored-job-row';
import { connectTestClient, uniqueDatabaseName } from '../support/test-database';

@Injectable()
class Handlers {
  @JobHandler('solo', { globalConcurrency: 1 })
  solo(_payload: unknown, _ctx: JobExecutionContext) {}

  @JobHandler('free')
  free(_payload: unknown, _ctx: JobExecutionContext) {}
}

@Injectable()
class FreeOnly {
  @JobHandler('free')
  free(_payload: unknown, _ctx: JobExecutionContext) {}
}

@Injectable()
class SoloOnly {
  @JobHandler('solo', { globalConcurrency: 1 })
  solo(_payload: unknown, _ctx: JobExecutionContext) {}
}

/**
 * A claim step beside limited names sends one command per limited name, then one for the others. The generative
 * checker (long seed 3602) caught a worker whose step went on claiming after SIGTERM: the claim landed a second into
 * shutdown, its answer came after its lease, another worker reclaimed the row and charged an attempt that no handler
 * ran. Once shutdown has begun, a step sends nothing more.
 */
describe('claims at shutdown', () => {
  const apps: JobsTestApp[] = [];
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()));
  });

  it('sends no further claim command once shutdown began: a step that asked a limited name first asks nothing more', async () => {
    const app = await createJobsTestApp({
      dbName: uniqueDatabaseName('claims_at_shutdown'),
      options: { worker: false },
      providers: [Handlers],
    });
    apps.push(app);
    const claims = app.get(JobClaimService);
    const deadline = app.get(ShutdownDeadline);
    // Which name each step asks for, in order; once armed, shutdown begins when the limited name's claim returns.
    const asked: string[] = [];
    let armed = false;
    const limited = app.get(LimitedClaim);
    const take = limited.take.bind(limited);
    limited.take = async (request) => {
      asked.push('solo');
      const result = await take(request);
      if (armed) deadline.start();
      return result;
    };
    const pendingTake = app.stores.claim.take.bind(app.stores.claim);
    app.stores.claim.take = (source, now, lockId, lockedUntil, scope, slots) => {
      // The limited name's claim takes its row through this store too: only the other names' takes are recorded.
      if (!scope.names.includes('solo')) asked.push(deadline.started ? 'free after shutdown began' : 'free');
      return pendingTake(source, now, lockId, lockedUntil, scope, slots);
    };
    // The order rotates per step: step until the last one asked the unlimited names first, so the next asks 'solo' first.
    for (let i = 0; i < 2 && asked[0] !== 'free'; i += 1) {
      asked.length = 0;
      expect(await claims.claimNext()).toBeNull();
    }
    expect(asked[0]).toBe('free');
    const job = await app.jobs.enqueue('free', {});
    armed = true;
    asked.length = 0;

    expect(await claims.claimNext()).toBeNull();

    expect(asked).toEqual(['solo']);
    expect(await app.jobs.findById(job.id)).toMatchObject({ status: 'pending', attemptCount: 0 });
  });

  it("sends no pending take of a limited name once shutdown began during that name's reclaim search", async () => {
    // Found by the test above on a loaded machine: when its step was due a reclaim search, the limited name searched
    // for expired leases, shutdown began, and the step still sent the name's pending take.
    const app = await createJobsTestApp({
      dbName: uniqueDatabaseName('reclaim_at_shutdown'),
      options: { worker: false },
      providers: [SoloOnly],
    });
    apps.push(app);
    const deadline = app.get(ShutdownDeadline);
    const sources: string[] = [];
    const limited = app.get(LimitedClaim);
    const take = limited.take.bind(limited);
    limited.take = async (request) => {
      sources.push(request.source);
      const result = await take(request);
      deadline.start(); // shutdown begins while the first command of the step (its reclaim search) is answered
      return result;
    };
    const job = await app.jobs.enqueue('solo', {});

    // A name's first step searches for expired leases first.
    expect(await app.get(JobClaimService).claimNext()).toBeNull();

    expect(sources).toEqual(['running']);
    expect(await app.jobs.findById(job.id)).toMatchObject({ status: 'pending', attemptCount: 0 });
  });

  it('sends no claim once shutdown began while a quiet worker read the next due time', async () => {
    // The checker's quick seed 2427 (its planted triggers, on this library): an idle worker reads when its next job is
    // due before claiming; shutdown began during that read, and the claim it then sent landed and was charged.
    const dbName = uniqueDatabaseName('next_due_at_shutdown');
    const app = await createJobsTestApp({ dbName, options: { worker: false }, providers: [FreeOnly] });
    apps.push(app);
    const claims = app.get(JobClaimService);
    const deadline = app.get(ShutdownDeadline);
    // Quiet: a claim found nothing (and read that nothing is pending).
    expect(await claims.claimNext()).toBeNull();
    // A due job stored by another process: no local arrival, so the quiet worker reads the next due time first.
    const client = await connectTestClient({ maxPoolSize: 1 });
    try {
      await client
        .db(dbName)
        .collection('jobs')
        .insertOne(storedJobRow({ name: 'free', status: 'pending', finishedAt: undefined }));
    } finally {
      await client.close();
    }
    const reads: string[] = [];
    const earliest = app.stores.claim.earliestRunAt.bind(app.stores.claim);
    app.stores.claim.earliestRunAt = async (scope) => {
      const runAt = await earliest(scope);
      reads.push(runAt === null ? 'none' : 'due');
      deadline.start(); // shutdown begins while the read is answered
      return runAt;
    };
    const take = app.stores.claim.take.bind(app.stores.claim);
    // Takes sent once shutdown has begun. On a loaded machine more than a reclaim interval can pass between the two
    // steps, and then this step searches for expired leases (a take from `running`) before it reads the next due time:
    // that take comes before shutdown (a CI run beside the long checker caught this test counting it).
    const takes: string[] = [];
    app.stores.claim.take = (source, ...rest) => {
      if (deadline.started) takes.push(source);
      return take(source, ...rest);
    };

    expect(await claims.claimNext()).toBeNull();

    expect(reads).toContain('due');
    expect(takes).toEqual([]);
    expect(await app.jobs.stats()).toMatchObject({ pending: 1, running: 0 });
  });

  it('close() waits for the hand-back of a claim that will not start, sent before shutdown began', async () => {
    // The long checker's seed 3806: a claim landed for a name paused meanwhile, and its hand-back to pending failed
    // once; SIGTERM came then, close() returned 12 ms later without waiting for the hand-back's retry, and the row,
    // left running, was reclaimed and charged an attempt that no handler ran (dead with 1 attempt of 1).
    const dbName = uniqueDatabaseName('hand_back_at_shutdown');
    const app = await createJobsTestApp({
      dbName,
      options: { pollIntervalMs: 50, claimBatchSize: 1, shutdownGraceMs: 200 },
      providers: [Handlers],
    });
    const take = app.stores.claim.take.bind(app.stores.claim);
    app.stores.claim.take = async (source, now, lockId, lockedUntil, scope, slots) => {
      const taken = await take(source, now, lockId, lockedUntil, scope, slots);
      // Paused while the claim was in flight: the runner hands the row back instead of starting it.
      if (taken && source === 'pending' && scope.names.includes('free')) await app.jobs.pause('free');
      return taken;
    };
    let closing: Promise<void> | undefined;
    let failures = 0;
    const release = app.stores.outcome.release.bind(app.stores.outcome);
    app.stores.outcome.release = (id, lockId, at, logs) => {
      if (failures < 3) {
        failures += 1;
        // Shutdown begins as the first copy fails: the copies after it are sent during shutdown.
        closing ??= app.close();
        return Promise.reject(new MongoNetworkError('injected: the hand-back did not reach the server'));
      }
      return release(id, lockId, at, logs);
    };
    const job = await app.jobs.enqueue('free', {});
    const client = await connectTestClient({ maxPoolSize: 1 });
    try {
      await waitFor(() => closing !== undefined, 'the hand-back to fail once');
      await closing;
      expect(failures).toBe(3);
      expect(await client.db(dbName).collection('jobs').findOne({})).toMatchObject({
        _id: expect.anything(),
        status: 'pending',
        attemptCount: 0,
      });
      expect(
        await client
          .db(dbName)
          .collection('jobs')
          .findOne({ lockedBy: { $exists: true } }),
      ).toBeNull();
      expect(job.id).toBeTruthy();
    } finally {
      await client.close();
    }
  });
});
