import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { MongoClient } from 'mongodb';
import { ChaosCluster } from '../support/chaos-cluster';
import {
  type ExecutionRecord,
  groupByJob,
  lateWatchdogs,
  leaseOverlaps,
  readExecutions,
  startedWithoutLease,
} from '../support/execution-records';
import { createJobsTestApp, type JobsTestApp, waitFor } from '../support/jobs-app';
import { sleep } from '../support/sleep';
import { randomDelay, TcpProxy } from '../support/tcp-proxy';
import { connectTestClient, testMongoUri, uniqueDatabaseName } from '../support/test-database';

const LEASE_MS = 1000;
const LONG_JOBS = 3;
const LONG_MS = 10_000;
// Latency costs attempts (see the second test); the point here is safety, not the retry budget.
const MAX_ATTEMPTS = 20;
const SHORT_JOBS = 45;
/** How late a watchdog may abort on a loaded machine (timer and event-loop lag). */
const WATCHDOG_MARGIN_MS = 150;
/** Per chunk, so a round trip costs 1.4–1.8 s: longer than the whole lease. */
const STALL_DELAY = randomDelay(700, 900);
const STALL_MS = 4_000;

describe('chaos: every database message delayed 0–200 ms', () => {
  const dbName = uniqueDatabaseName('chaos_slow');
  // Workers a and b share one slow link; c has its own, which gets much slower for a while.
  let shared: TcpProxy;
  let own: TcpProxy;
  let producer: JobsTestApp;
  let client: MongoClient;
  let cluster: ChaosCluster;
  let clusterC: ChaosCluster;

  beforeAll(async () => {
    [shared, own] = await Promise.all([TcpProxy.start(testMongoUri()), TcpProxy.start(testMongoUri())]);
    shared.setDelay(randomDelay(0, 200));
    own.setDelay(randomDelay(0, 200));
    client = await connectTestClient();
    producer = await createJobsTestApp({ dbName, options: { worker: false } });
    const common = {
      recordUri: testMongoUri(),
      dbName,
      jobs: { leaseMs: LEASE_MS, pollIntervalMs: 50, concurrency: 4, shutdownGraceMs: 2_000 },
    };
    cluster = new ChaosCluster({ ...common, jobsUri: shared.uri });
    clusterC = new ChaosCluster({ ...common, jobsUri: own.uri });
  });

  afterAll(async () => {
    await Promise.all([cluster?.killAll(), clusterC?.killAll()]);
    await producer?.close();
    await Promise.all([shared?.close(), own?.close()]);
    await client
      ?.db(dbName)
      .dropDatabase()
      .catch(() => undefined);
    await client?.close();
  });

  it('never two owners of a live lease; a worker whose link stalls loses its jobs on time to the others', async () => {
    const db = client.db(dbName);
    const executions = db.collection<ExecutionRecord>('executions');
    // c alone first, so it surely holds the long jobs when its link stalls.
    const c = clusterC.spawn('c');
    await c.ready;
    await producer.jobs.enqueueMany(
      Array.from({ length: LONG_JOBS }, () => ({
        name: 'chaos.sleep',
        payload: { ms: LONG_MS, laterMs: 300 },
        options: { maxAttempts: MAX_ATTEMPTS },
      })),
    );
    const liveLongOnC = () =>
      executions.find({ workerId: c.id, ms: LONG_MS, end: { $exists: false }, abortedAtStart: false }).toArray();
    // Past its first renewals (the riskiest moment under latency), so it is still live at the stall.
    await waitFor(
      async () => (await liveLongOnC()).some((e) => e.start < Date.now() - LEASE_MS),
      'c running a long job',
    );
    const [a, b] = [cluster.spawn('a'), cluster.spawn('b')];
    await Promise.all([a.ready, b.ready]);
    await producer.jobs.enqueueMany(
      Array.from({ length: SHORT_JOBS }, () => ({
        name: 'chaos.sleep',
        payload: { ms: 300 + Math.floor(Math.random() * 900) },
        options: { maxAttempts: MAX_ATTEMPTS },
      })),
    );

    // Long jobs c still runs, with work left beyond the latest deadline it can reach: it must lose them.
    const liveAtStall = (await liveLongOnC()).filter((e) => e.start + e.ms > Date.now() + LEASE_MS + 500);
    const stallStart = Date.now();
    own.setDelay(STALL_DELAY);
    await sleep(STALL_MS);
    own.setDelay(randomDelay(0, 200));

    let stats = await producer.jobs.stats();
    const allCompleted = async () => {
      stats = await producer.jobs.stats();
      return stats.completed === LONG_JOBS + SHORT_JOBS;
    };
    // c's cluster first: it fails fast if c crashes, and a or b crashing shows in the check right after.
    await clusterC.waitFor(allCompleted, () => `every job completed (${JSON.stringify(stats)})`, 40_000);
    const rows = await db.collection('jobs').find({}).toArray();
    expect(rows.filter((row) => row.status !== 'completed')).toEqual([]);
    expect([...cluster.unexpectedExits, ...clusterC.unexpectedExits]).toEqual([]);
    expect([a, b, c].map((worker) => worker.alive)).toEqual([true, true, true]);

    const records = await readExecutions(db);
    expect(leaseOverlaps(records)).toEqual([]);
    expect(lateWatchdogs(records, WATCHDOG_MARGIN_MS)).toEqual([]);

    // c's long jobs ran out of lease during the stall (no renewal could come back in time), were aborted by
    // the watchdog by their deadline (at most one lease after the stall began), and another execution
    // (a later fencing token) took each over and finished it.
    expect(liveAtStall.length).toBeGreaterThanOrEqual(1);
    const byJob = groupByJob(records);
    for (const live of liveAtStall) {
      const list = byJob.get(live.jobId) ?? [];
      const lost = list.find((e) => e.fencingToken === live.fencingToken);
      expect(lost).toMatchObject({ leaseLostReason: 'expired', stale: true });
      expect(lost?.abortedAt).toBeGreaterThanOrEqual(stallStart);
      expect(lost?.abortedAt).toBeLessThanOrEqual(stallStart + LEASE_MS + WATCHDOG_MARGIN_MS);
      const last = list[list.length - 1];
      expect(last.fencingToken).toBeGreaterThan(live.fencingToken);
      expect(last).toMatchObject({ stale: false, end: expect.any(Number) });
    }
  }, 90_000);

  // Reads the records the test above left (a separate test, so this known failure cannot hide the one above).
  it('never calls a handler whose lease ran out before its claim was answered', async () => {
    // During the stall c's claims came back after their lockedUntil (a claim costs two round trips of
    // 1.4–1.8 s, the lease is 1 s): the other workers may reclaim such a row, whose deadline has passed,
    // before c's handler even starts. Its handler must not be called.
    const db = client.db(dbName);
    const records = await readExecutions(db);
    expect(startedWithoutLease(records)).toEqual([]);
    // ...and such claims did happen: they show as fencing tokens without a recorded execution.
    const rows = await db
      .collection('jobs')
      .find({}, { projection: { fencingToken: 1 } })
      .toArray();
    const byJob = groupByJob(records);
    const unrun = rows.reduce(
      (sum, row) => sum + row.fencingToken - (byJob.get(row._id.toHexString())?.length ?? 0),
      0,
    );
    expect(unrun).toBeGreaterThanOrEqual(1);
  });
});
