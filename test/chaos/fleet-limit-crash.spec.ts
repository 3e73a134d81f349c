import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { MongoClient } from 'mongodb';
import { ChaosCluster, type ChaosWorker } from '../support/chaos-cluster';
import { leaseOverlaps, readExecutions } from '../support/execution-records';
import { createJobsTestApp, type JobsTestApp, waitFor } from '../support/jobs-app';
import { maxOverlap } from '../support/limit-records';
import { sleep } from '../support/sleep';
import { connectTestClient, testMongoUri, uniqueDatabaseName } from '../support/test-database';

const WORKERS = 3;
const JOBS = 300;
const KILLS = 3;
const LEASE_MS = 1000;
const LIMIT = 2; // chaos.limited's globalConcurrency (test/support/chaos-worker.cjs)

describe('chaos: a fleet-wide limit while worker processes are SIGKILLed', () => {
  const dbName = uniqueDatabaseName('chaos_limit');
  let producer: JobsTestApp;
  let client: MongoClient;
  let cluster: ChaosCluster;

  beforeAll(async () => {
    client = await connectTestClient();
    producer = await createJobsTestApp({ dbName, options: { worker: false } });
    cluster = new ChaosCluster({
      jobsUri: testMongoUri(),
      recordUri: testMongoUri(),
      dbName,
      jobs: { leaseMs: LEASE_MS, pollIntervalMs: 50, concurrency: 3, shutdownGraceMs: 5_000 },
      limited: true,
    });
  });

  afterAll(async () => {
    await cluster?.killAll();
    await producer?.close();
    await client
      ?.db(dbName)
      .dropDatabase()
      .catch(() => undefined);
    await client?.close();
  });

  it(`${JOBS} jobs with globalConcurrency ${LIMIT} on ${WORKERS} workers, ${KILLS} SIGKILLs: never more than ${LIMIT} live owners, none lost`, async () => {
    const workers: ChaosWorker[] = Array.from({ length: WORKERS }, () => cluster.spawn());
    await Promise.all(workers.map((worker) => worker.ready));
    await producer.jobs.enqueueMany(
      Array.from({ length: JOBS }, () => ({
        name: 'chaos.limited',
        payload: { ms: 20 + Math.floor(Math.random() * 80) },
        options: { maxAttempts: 20, strict: false },
      })),
    );
    const killedAt = new Map<string, number>();
    for (let i = 0; i < KILLS; i += 1) {
      await sleep(700);
      // Kill a worker that runs a limited job right now, so the kill strands a held slot. Chosen from the read that
      // found one: a second read could find none (the job finished meanwhile).
      const db = client.db(dbName);
      let victim: (typeof workers)[number] | undefined;
      await waitFor(
        async () => {
          const running = await db
            .collection('executions')
            .find({ end: { $exists: false } })
            .toArray();
          victim = workers.find((w) => w.alive && w.isReady && running.some((r) => r.workerId === w.id));
          return victim !== undefined;
        },
        'a worker running a limited job',
        30_000,
      );
      if (!victim) throw new Error('no victim');
      victim.kill('SIGKILL');
      killedAt.set(victim.id, Date.now());
      await victim.exited;
      workers[workers.indexOf(victim)] = cluster.spawn();
    }
    let stats = await producer.jobs.stats();
    await cluster.waitFor(
      async () => {
        stats = await producer.jobs.stats();
        return stats.completed === JOBS;
      },
      () => `all ${JOBS} jobs completed (${JSON.stringify(stats)})`,
      90_000,
    );
    expect(cluster.unexpectedExits).toEqual([]);

    const executions = await readExecutions(client.db(dbName));
    // A killed execution was live until its process died.
    const intervals = executions.map((e) => ({ start: e.start, end: e.end ?? killedAt.get(e.workerId) }));
    expect(intervals.every((interval) => interval.end !== undefined)).toBe(true);
    expect(maxOverlap(intervals)).toBe(LIMIT);
    // Some kill stranded a running execution (a victim may finish its job between the check and the kill).
    expect(executions.filter((e) => e.end === undefined).length).toBeGreaterThan(0);
    expect(leaseOverlaps(executions)).toEqual([]);
    const rows = await client.db(dbName).collection('jobs').find({}).toArray();
    expect(rows.filter((row) => row.status !== 'completed')).toEqual([]);
    expect(rows.filter((row) => row.concurrencySlot !== undefined)).toEqual([]);
  }, 150_000);
});
