import { describe, expect, it } from '@jest/globals';
import type { MongoClient } from 'mongodb';
import type { JobsWorkerStatus } from '../../lib';
import { ChaosCluster, type ChaosWorker } from '../support/chaos-cluster';
import { lateWatchdogs, leaseOverlaps, readExecutions } from '../support/execution-records';
import { createJobsTestApp, type JobsTestApp, waitFor } from '../support/jobs-app';
import { notReached, reached, type ScenarioRun, untilPreconditionReached } from '../support/precondition';
import { scratchDatabases } from '../support/scratch-databases';
import { sleep } from '../support/sleep';
import { TcpProxy } from '../support/tcp-proxy';
import { testMongoUri, uniqueDatabaseName } from '../support/test-database';

const OUTAGE_MS = 5_000;
const LEASE_MS = 1000;
const POLL_MS = 100;
const SHORT_JOBS = 60;
const LONG_JOBS = 4;
/**
 * The long jobs' first run; a rerun (after the outage took the first away) takes 300 ms. Long enough that they are
 * still running when the link drops however late that comes on a loaded machine (at 3 s some had ended before it).
 */
const LONG_MS = 10_000;
/** How late a watchdog may abort on a loaded machine (timer and event-loop lag). */
const WATCHDOG_MARGIN_MS = 150;

interface HealthSample {
  worker: string;
  at: number;
  status: JobsWorkerStatus['status'] | 'no answer';
  database: JobsWorkerStatus['database'];
  reason?: string;
}

/**
 * One run from scratch (own database, proxy and workers): long and short jobs running, the link dropped for 5 s, every
 * job completed after, health sampled throughout. Reached when the long jobs were running at the drop and work was
 * left when the database came back.
 */
async function outageScenario(client: MongoClient, dbNames: string[]): Promise<ScenarioRun<void>> {
  const dbName = uniqueDatabaseName('chaos_outage');
  dbNames.push(dbName);
  const proxy = await TcpProxy.start(testMongoUri());
  const cluster = new ChaosCluster({
    jobsUri: proxy.uri,
    recordUri: testMongoUri(),
    dbName,
    jobs: { leaseMs: LEASE_MS, pollIntervalMs: POLL_MS, concurrency: 4, shutdownGraceMs: 2_000 },
    // The app's choice: notice a dead server within a second and look for it again every half second.
    mongoose: { serverSelectionTimeoutMS: 1000, heartbeatFrequencyMS: 500, connectTimeoutMS: 1000 },
  });
  let producer: JobsTestApp | undefined;
  // The health sampler loops until stopped: the run stops it too, should it fail half-way.
  let stopSampling = async () => {};
  try {
    const app = await createJobsTestApp({ dbName, options: { worker: false } });
    producer = app;
    const workers: ChaosWorker[] = [cluster.spawn('a'), cluster.spawn('b')];
    await Promise.all(workers.map((worker) => worker.ready));
    for (const worker of workers) expect(await worker.status()).toMatchObject({ status: 'up', database: 'up' });

    // Long jobs are sure to be running when the connection drops: their leases must run out on time.
    await app.jobs.enqueueMany(
      Array.from({ length: LONG_JOBS }, () => ({
        name: 'chaos.sleep',
        payload: { ms: LONG_MS, laterMs: 300 },
        options: { priority: 1 },
      })),
    );
    await app.jobs.enqueueMany(
      Array.from({ length: SHORT_JOBS }, () => ({
        name: 'chaos.sleep',
        payload: { ms: 200 + Math.floor(Math.random() * 400) },
      })),
    );
    const longRunning = () =>
      client
        .db(dbName)
        .collection('executions')
        .countDocuments({ ms: LONG_MS, end: { $exists: false } });
    await waitFor(async () => (await longRunning()) >= LONG_JOBS, 'the long jobs running');

    const samples: HealthSample[] = [];
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const at = Date.now();
        // A worker that does not answer at all (crashed, or its event loop stuck) is a sample too.
        const statuses = await Promise.all(
          workers.map((worker) =>
            worker.status(500).catch((error: Error) => ({
              status: 'no answer' as const,
              database: 'down' as const,
              reason: error.message,
            })),
          ),
        );
        for (const [i, { status, database, reason }] of statuses.entries()) {
          samples.push({ worker: workers[i].id, at, status, database, reason });
        }
        await sleep(100);
      }
    })();
    stopSampling = async () => {
      sampling = false;
      await sampler;
    };

    const dropStart = Date.now();
    await proxy.drop(OUTAGE_MS);
    const dropEnd = Date.now();
    const unfinishedAtRestore = (await app.jobs.stats()).completed < LONG_JOBS + SHORT_JOBS;
    const db = client.db(dbName);
    // The long jobs were running when the link dropped (a lease lost before it would have ended one).
    const longLiveAtDrop = (await readExecutions(db)).filter(
      (e) => e.ms === LONG_MS && e.start < dropStart && (e.end ?? Number.POSITIVE_INFINITY) > dropStart,
    ).length;
    let stats = await app.jobs.stats();
    await cluster.waitFor(
      async () => {
        stats = await app.jobs.stats();
        return stats.completed === LONG_JOBS + SHORT_JOBS;
      },
      () => `every job completed after the outage (${JSON.stringify(stats)})`,
      30_000,
    );
    // Health is back for every worker once its jobs flow again (it may lag the first completions a little).
    await cluster.waitFor(
      () => workers.every((w) => samples.some((s) => s.worker === w.id && s.at > dropEnd && s.status === 'up')),
      () =>
        `health up again (last samples: ${JSON.stringify(
          workers.map((w) => samples.filter((s) => s.worker === w.id).at(-1)),
        )})`,
      10_000,
    );
    await stopSampling();

    expect(cluster.unexpectedExits).toEqual([]);
    expect(workers.map((worker) => worker.alive)).toEqual([true, true]);
    for (const worker of workers) {
      const own = samples.filter((s) => s.worker === worker.id);
      const during = own.filter((s) => s.at >= dropStart && s.at + 500 < dropEnd);
      // Down within 2 s of the drop (the ping times out after 500 ms), for the rest of the outage.
      const firstDown = during.find((s) => s.status === 'down');
      expect(firstDown?.database).toBe('down');
      expect((firstDown?.at ?? Number.POSITIVE_INFINITY) - dropStart).toBeLessThan(2_000);
      expect(during.filter((s) => s.at >= dropStart + 2_000 && s.status === 'up')).toEqual([]);
      // Up again within 5 s of the end of the outage.
      const firstUpAfter = own.find((s) => s.at >= dropEnd && s.status === 'up');
      expect((firstUpAfter?.at ?? Number.POSITIVE_INFINITY) - dropEnd).toBeLessThan(5_000);
    }
    expect(proxy.refused).toBeGreaterThan(0); // the workers did try to reconnect during the outage

    const rows = await db.collection('jobs').find({}).toArray();
    expect(rows.filter((row) => row.status !== 'completed')).toEqual([]);
    const executions = await readExecutions(db);
    expect(leaseOverlaps(executions)).toEqual([]);
    expect(lateWatchdogs(executions, WATCHDOG_MARGIN_MS)).toEqual([]);
    if (!unfinishedAtRestore) return notReached('every job completed before the database came back');
    if (longLiveAtDrop < LONG_JOBS)
      return notReached(`${longLiveAtDrop} of ${LONG_JOBS} long jobs running at the drop`);
    // The long jobs lost their leases during the outage: aborted as expired, then rerun to completion.
    const expiredDuringOutage = executions.filter(
      (e) => e.leaseLostReason === 'expired' && (e.abortedAt ?? 0) > dropStart && (e.abortedAt ?? 0) < dropEnd,
    );
    expect(expiredDuringOutage.length).toBeGreaterThanOrEqual(LONG_JOBS);

    // And they still shut down cleanly.
    for (const worker of workers) worker.kill('SIGTERM');
    expect(await Promise.all(workers.map((worker) => worker.exited))).toEqual([
      { code: 0, signal: null },
      { code: 0, signal: null },
    ]);
    return reached();
  } finally {
    await stopSampling();
    await cluster.killAll();
    await producer?.close();
    await proxy.close();
  }
}

describe('chaos: the database is unreachable for 5 s', () => {
  const scratch = scratchDatabases();

  it(
    'no worker crashes, health goes down then up, and every job completes afterwards',
    async () => {
      await untilPreconditionReached(
        'the long jobs running when the link dropped, and work left when it came back',
        () => outageScenario(scratch.client, scratch.names),
      );
    },
    3 * 90_000,
  );
});
