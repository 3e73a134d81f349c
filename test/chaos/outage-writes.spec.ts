import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { type MongoClient, ObjectId } from 'mongodb';
import { type JobExecutionContext, JobHandler } from '../../lib';
import { SHUTDOWN_SETTLE_MS, SHUTDOWN_WRITE_MS } from '../../lib/model/jobs.constants';
import { JobRunner } from '../../lib/worker/job-runner.service';
import { createJobsTestApp, deferred, type JobsTestApp, waitFor } from '../support/jobs-app';
import { TcpProxy } from '../support/tcp-proxy';
import { connectTestClient, testMongoUri, uniqueDatabaseName } from '../support/test-database';

/** The driver timeouts our chaos tests use: a dead server is noticed within half a second. */
const FAST_FAILING_DRIVER = { serverSelectionTimeoutMS: 500, heartbeatFrequencyMS: 500, connectTimeoutMS: 500 };
/** Long enough that no chunk is forwarded while a test runs: a black-holed network. */
const BLACK_HOLE_MS = 10 * 60_000;

const runs: string[] = [];
let gate = deferred();

@Injectable()
class OutageHandlers {
  @JobHandler('outage.gated')
  async gated(_payload: unknown, ctx: JobExecutionContext) {
    runs.push(ctx.jobId);
    await gate.promise;
  }

  @JobHandler('outage.cooperative')
  async cooperative(_payload: unknown, ctx: JobExecutionContext) {
    runs.push(ctx.jobId);
    await new Promise((_resolve, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason)));
  }
}

describe('chaos: writes while the database is away', () => {
  let proxy: TcpProxy;
  let client: MongoClient;
  const apps: JobsTestApp[] = [];
  const dbName = uniqueDatabaseName('outage_writes');
  const readById = (id: string) =>
    client
      .db(dbName)
      .collection('jobs')
      .findOne({ _id: new ObjectId(id) });

  beforeEach(async () => {
    runs.length = 0;
    gate = deferred();
    proxy = await TcpProxy.start(testMongoUri());
    client = await connectTestClient();
  });
  afterEach(async () => {
    gate.resolve();
    proxy.setDelay(0);
    await Promise.all(apps.splice(0).map((app) => app.close()));
    await proxy.close();
    await client.db(dbName).dropDatabase();
    await client.close();
  });

  const bootThroughProxy = async (options: object, driver: Record<string, unknown> = FAST_FAILING_DRIVER) => {
    const app = await createJobsTestApp({
      dbName,
      uri: proxy.uri,
      mongoose: driver,
      options: { pollIntervalMs: 50, ...options },
      providers: [OutageHandlers],
    });
    apps.push(app);
    return app;
  };

  it('keeps a job that finished during a 3 s outage owned and writes its completion once the database is back', async () => {
    const app = await bootThroughProxy({ leaseMs: 8_000 });
    const job = await app.jobs.enqueue('outage.gated');
    await waitFor(() => runs.length === 1, 'the handler to start');
    const outage = proxy.drop(3_000);
    gate.resolve(); // the handler finishes while the database is unreachable
    await outage;
    await waitFor(async () => (await readById(job.id))?.status === 'completed', 'the completion to land', 6_000);
    expect(await readById(job.id)).toMatchObject({ status: 'completed', attemptCount: 0, fencingToken: 1 });
    expect(runs).toEqual([job.id]);
  });

  it('returns from close() within the grace period plus a fixed allowance when the database stops answering', async () => {
    const grace = 200;
    // The driver's default timeouts (30 s server selection, no socket timeout): nothing inside the driver ends a write.
    const app = await bootThroughProxy({ leaseMs: 3_000, shutdownGraceMs: grace }, {});
    const job = await app.jobs.enqueue('outage.cooperative');
    await waitFor(() => runs.length === 1, 'the handler to start');
    proxy.setDelay(BLACK_HOLE_MS);
    const started = Date.now();
    await app.close();
    apps.splice(apps.indexOf(app), 1);
    const elapsed = Date.now() - started;
    // Generous slack for a loaded 2-core machine; before the fix this took minutes.
    expect(elapsed).toBeLessThan(grace + SHUTDOWN_SETTLE_MS + SHUTDOWN_WRITE_MS + 2_000);
    proxy.setDelay(0);
    // The release could not be written: the row is reclaimed after its lease, as after a crash.
    const row = await readById(job.id);
    expect(row?.status).toBe('running');
    const rescuer = await createJobsTestApp({
      dbName,
      options: { pollIntervalMs: 50, leaseMs: 3_000 },
      providers: [OutageHandlers],
    });
    apps.push(rescuer);
    await waitFor(() => runs.length === 2, 'the reclaim after the lease', 8_000);
  });

  it('gives up a completion write that hangs once the lease runs out: the slot is freed and the job is reclaimed', async () => {
    const app = await bootThroughProxy({ leaseMs: 1_500 });
    const job = await app.jobs.enqueue('outage.gated');
    await waitFor(() => runs.length === 1, 'the handler to start');
    proxy.setDelay(BLACK_HOLE_MS); // renewals and the completion write now hang, unanswered
    gate.resolve();
    const runner = app.get(JobRunner);
    // The hung write is not awaited past the lease: the execution ends and frees its slot.
    await waitFor(() => runner.pollState().running === 0, 'the slot to be freed', 5_000);
    const rescuer = await createJobsTestApp({
      dbName,
      options: { pollIntervalMs: 50, leaseMs: 1_500 },
      providers: [OutageHandlers],
    });
    apps.push(rescuer);
    await waitFor(async () => (await readById(job.id))?.status === 'completed', 'the rescuer to finish it', 5_000);
    expect((await readById(job.id))?.attempts.map((a: { errorClass: string }) => a.errorClass)).toEqual([
      'LeaseExpired',
    ]);
    expect(runs).toEqual([job.id, job.id]);
  });
});
