import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable, type OnModuleInit } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { filter, map, config as rxjsConfig } from 'rxjs';
import { type JobEvent, type JobExecutionContext, JobHandler } from '../../lib';
import { JobsHealthModule } from '../../lib/health';
import { JobClaimStore } from '../../lib/persistence/job-claim.store';
// The sample's controller is exactly what a user writes: test that one rather than a copy.
import { HealthController } from '../../sample/health.controller';
import { createJobsTestApp, deferred, type JobsTestApp, waitFor } from '../support/jobs-app';
import { sleep } from '../support/sleep';
import { uniqueDatabaseName } from '../support/test-database';

const attempts = new Map<string, number>();

@Injectable()
class EventHandlers {
  @JobHandler('flaky-once', { backoff: { baseMs: 10, maxMs: 10 } })
  flaky(_payload: unknown, ctx: JobExecutionContext) {
    attempts.set(ctx.jobId, ctx.attempt);
    if (ctx.attempt === 1) throw new Error('first attempt fails');
  }
}

describe('events and health', () => {
  let app: JobsTestApp;

  beforeAll(async () => {
    app = await createJobsTestApp({
      dbName: uniqueDatabaseName('events_health'),
      options: { pollIntervalMs: 50, workerId: 'w-health' },
      providers: [EventHandlers, HealthController],
      imports: [{ module: JobsHealthModule }],
    });
  });
  afterAll(() => app.close());

  it('emits enqueued → started → retrying → started → completed, in order, without payloads', async () => {
    const events: JobEvent[] = [];
    const subscription = app.jobs.events$.subscribe((event) => events.push(event));
    const job = await app.jobs.enqueue('flaky-once', { secret: 'do-not-leak' });
    await waitFor(() => events.some((e) => e.jobId === job.id && e.type === 'completed'), 'completion event');
    subscription.unsubscribe();
    const mine = events.filter((e) => e.jobId === job.id);
    expect(mine.map((e) => [e.type, e.attempt])).toEqual([
      ['enqueued', 0],
      ['started', 1],
      ['retrying', 1],
      ['started', 2],
      ['completed', 2],
    ]);
    expect(mine[2].error).toBe('first attempt fails');
    expect(mine.every((e) => e.name === 'flaky-once' && e.at instanceof Date)).toBe(true);
    expect(JSON.stringify(mine)).not.toContain('do-not-leak');
  });

  it.each([
    { subscribed: 'before the enqueue began' },
    { subscribed: 'while the insert awaited its acknowledgement' }, // e.g. a dashboard tab opens
  ])(
    'emits enqueued before started when the worker here runs the job before the insert is acknowledged (subscribed $subscribed)',
    async ({ subscribed }) => {
      const events: JobEvent[] = [];
      const subscribe = () => app.jobs.events$.subscribe((event) => events.push(event));
      let subscription = subscribed === 'before the enqueue began' ? subscribe() : undefined;
      // The insert lands, but its acknowledgement reaches the enqueuer only after this process's worker ran the job.
      const insert = app.stores.enqueue.insert.bind(app.stores.enqueue);
      app.stores.enqueue.insert = async (doc) => {
        const outcome = await insert(doc);
        subscription ??= subscribe();
        const id = outcome.kind === 'inserted' ? outcome.doc._id : undefined;
        await waitFor(
          async () => (await app.connection.collection('jobs').findOne({ _id: id }))?.status === 'completed',
          'the job to run',
        );
        return outcome;
      };
      try {
        const job = await app.jobs.enqueue('flaky-once', {});
        await waitFor(() => events.some((e) => e.jobId === job.id && e.type === 'completed'), 'completion event');
        const mine = events.filter((e) => e.jobId === job.id).map((e) => e.type);
        expect(mine).toEqual(['enqueued', 'started', 'retrying', 'started', 'completed']);
      } finally {
        app.stores.enqueue.insert = insert;
        subscription?.unsubscribe();
      }
    },
  );

  it('isolates a throwing events$ subscriber: the job still completes and nothing reaches RxJS as unhandled', async () => {
    const unhandled: unknown[] = [];
    const previous = rxjsConfig.onUnhandledError;
    rxjsConfig.onUnhandledError = (error) => unhandled.push(error);
    const seen: string[] = [];
    const subscriptions = [
      app.jobs.events$.subscribe(() => {
        throw new Error('subscriber bug');
      }),
      app.jobs.events$.pipe(filter((e) => e.type === 'completed')).subscribe(() => {
        throw 'piped subscriber bug';
      }),
      app.jobs.events$.pipe(map((e) => e.type)).subscribe((type) => seen.push(type)),
    ];
    try {
      const job = await app.jobs.enqueue('flaky-once', {});
      await waitFor(async () => (await app.jobs.findById(job.id))?.status === 'completed', 'the job to complete');
      await sleep(20); // RxJS reports unhandled errors on a timer
      expect(unhandled).toEqual([]);
      expect(seen).toContain('completed'); // other subscribers still get every event
    } finally {
      for (const subscription of subscriptions) subscription.unsubscribe();
      rxjsConfig.onUnhandledError = previous;
    }
  });

  it('reports up while the poll loop polls, with worker facts', async () => {
    const status = await app.jobs.workerStatus();
    expect(status).toMatchObject({ status: 'up', database: 'up', worker: true, workerId: 'w-health', concurrency: 4 });
    expect(status.lastPollAt).toBeInstanceOf(Date);
    const result = await app.get(HealthController).check();
    expect(result).toMatchObject({
      status: 'ok',
      info: { jobs: { status: 'up', workerId: 'w-health', database: 'up' } },
    });
  });

  it('reports down while the poll loop is stalled, and up again once it moves', async () => {
    const stall = deferred();
    // An idle poll reads the next due time (a poll with a job known due sends the claim): the first of either stalls.
    const take = app.stores.claim.take.bind(app.stores.claim);
    const earliestRunAt = app.stores.claim.earliestRunAt.bind(app.stores.claim);
    let stalled = false;
    const stallOnce = async () => {
      if (stalled) return;
      stalled = true;
      await stall.promise; // a poll that never finishes, as with a blocked loop
    };
    app.stores.claim.take = async (source, ...args) => {
      if (source === 'pending') await stallOnce();
      return take(source, ...args);
    };
    app.stores.claim.earliestRunAt = async (...args) => {
      await stallOnce();
      return earliestRunAt(...args);
    };
    await waitFor(() => stalled, 'the loop to stall');
    await waitFor(async () => (await app.jobs.workerStatus()).status === 'down', 'status down', 2_000);
    const down = await app.jobs.workerStatus();
    expect(down.reason).toContain('has not finished a poll within 150 ms');
    await expect(app.get(HealthController).check()).rejects.toMatchObject({ status: 503 });
    stall.resolve();
    app.stores.claim.take = take;
    app.stores.claim.earliestRunAt = earliestRunAt;
    await waitFor(async () => (await app.jobs.workerStatus()).status === 'up', 'status up again', 2_000);
  });
});

describe('health of a producer-only process', () => {
  it('reports the database only', async () => {
    const app = await createJobsTestApp({ dbName: uniqueDatabaseName('producer_health'), options: { worker: false } });
    const status = await app.jobs.workerStatus();
    expect(status).toMatchObject({ status: 'up', worker: false, database: 'up', lastPollAt: null });
    await app.close();
    const closed = await app.jobs.workerStatus({ timeoutMs: 200 });
    expect(closed).toMatchObject({ status: 'down', database: 'down' });
  });
});

describe('health of a worker that just booted', () => {
  it('reports a worker still in its first poll up, measured from the loop start, and down once that poll stalls', async () => {
    const firstPoll = deferred();
    /** Holds the worker's very first claim, installed before the poll loop starts (onModuleInit runs first). */
    @Injectable()
    class SlowFirstPoll implements OnModuleInit {
      constructor(private readonly moduleRef: ModuleRef) {}
      onModuleInit() {
        const claims = this.moduleRef.get(JobClaimStore, { strict: false });
        const take = claims.take.bind(claims);
        claims.take = async (...args) => {
          await firstPoll.promise;
          return take(...args);
        };
      }
    }
    const booting = await createJobsTestApp({
      dbName: uniqueDatabaseName('first_poll'),
      options: { pollIntervalMs: 500 },
      providers: [SlowFirstPoll, EventHandlers],
    });
    try {
      const fresh = await booting.jobs.workerStatus();
      expect(fresh).toMatchObject({ status: 'up', lastPollAt: null });
      await waitFor(async () => (await booting.jobs.workerStatus()).status === 'down', 'status down', 5_000);
      expect((await booting.jobs.workerStatus()).reason).toContain('has not finished a poll within 1500 ms');
      firstPoll.resolve();
      await waitFor(async () => (await booting.jobs.workerStatus()).status === 'up', 'status up', 5_000);
    } finally {
      firstPoll.resolve();
      await booting.close();
    }
  });
});
