import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { Injectable, Logger } from '@nestjs/common';
import { type JobExecutionContext, JobHandler } from '../../lib';
import { createJobsTestApp, deferred, type JobsTestApp, waitFor } from '../support/jobs-app';
import { connectTestClient, uniqueDatabaseName } from '../support/test-database';

const WORKER_ID = 'summary-worker';
const started = new Set<string>();
/** Opened once close() has begun: the quick handler then ends within the grace period. */
const shutdownBegan = deferred();
/**
 * Never opened: the deaf handler ignores its abort for good. A pending promise keeps no process alive, and its lease
 * (2 s) ends soon after the test, which ends its execution as abandoned, writing nothing.
 */
const never = deferred();

@Injectable()
class SummaryHandlers {
  @JobHandler('summary.before')
  before() {}

  /** Ends by itself within the grace period: finished (completed). */
  @JobHandler('summary.quick')
  async quick(_payload: unknown, ctx: JobExecutionContext) {
    started.add(ctx.jobId);
    await shutdownBegan.promise;
  }

  /** Stops on the shutdown abort (its wait rejects with an AbortError): released, no attempt counted. */
  @JobHandler('summary.cooperative')
  async cooperative(_payload: unknown, ctx: JobExecutionContext) {
    started.add(ctx.jobId);
    await sleep(60_000, undefined, { signal: ctx.signal });
  }

  /** Ignores the abort past the settle wait: left to its lease. */
  @JobHandler('summary.deaf')
  async deaf(_payload: unknown, ctx: JobExecutionContext) {
    started.add(ctx.jobId);
    await never.promise;
  }
}

/**
 * `close()` ends with one line saying what the shutdown did with the jobs that were running: how many it finished,
 * released and left to their leases (with those ids). A job that ended before shutdown is not counted.
 */
describe('the shutdown summary', () => {
  const dbName = uniqueDatabaseName('shutdown_summary');
  let app: JobsTestApp;
  const ids: Record<'before' | 'quick' | 'cooperative' | 'deaf', string> = {
    before: '',
    quick: '',
    cooperative: '',
    deaf: '',
  };

  beforeAll(async () => {
    app = await createJobsTestApp({
      dbName,
      options: { workerId: WORKER_ID, pollIntervalMs: 20, concurrency: 4, shutdownGraceMs: 300, leaseMs: 2_000 },
      providers: [SummaryHandlers],
    });
  });
  afterAll(() => {
    jest.restoreAllMocks();
  });

  it('logs 1 finished, 1 released and 1 left to its lease, naming the one left', async () => {
    ids.before = (await app.jobs.enqueue('summary.before')).id;
    await waitFor(async () => (await app.jobs.findById(ids.before))?.status === 'completed', 'summary.before done');
    for (const name of ['quick', 'cooperative', 'deaf'] as const) {
      ids[name] = (await app.jobs.enqueue(`summary.${name}`)).id;
    }
    await waitFor(() => started.size === 3, 'the three handlers to start');

    const logged = jest.spyOn(Logger.prototype, 'log');
    const closed = app.close();
    shutdownBegan.resolve();
    await closed;

    const lines = logged.mock.calls.map((call) => String(call[0])).filter((line) => line.includes('stopped'));
    expect(lines).toEqual([
      `Worker ${WORKER_ID} stopped: 1 job finished, 1 released, 1 left to its lease (ids ${ids.deaf})`,
    ]);

    const client = await connectTestClient();
    try {
      const rows = await client.db(dbName).collection('jobs').find({}).toArray();
      const row = (id: string) => rows.find((r) => String(r._id) === id);
      expect(row(ids.quick)).toMatchObject({ status: 'completed' });
      expect(row(ids.cooperative)).toMatchObject({ status: 'pending', attemptCount: 0 });
      expect(row(ids.deaf)).toMatchObject({ status: 'running', lockedBy: expect.any(String) });
    } finally {
      await client.close();
    }
  }, 20_000);
});
