import { describe, expect, it } from '@jest/globals';
import type { MongoClient } from 'mongodb';
import { ChaosCluster, type ChaosWorker } from '../support/chaos-cluster';
import { type ExecutionRecord, leaseOverlaps, readExecutions } from '../support/execution-records';
import { createJobsTestApp, type JobsTestApp, waitFor } from '../support/jobs-app';
import { maxOverlap } from '../support/limit-records';
import { notReached, reached, type ScenarioRun, untilPreconditionReached } from '../support/precondition';
import { scratchDatabases } from '../support/scratch-databases';
import { sleep } from '../support/sleep';
import { testMongoUri, uniqueDatabaseName } from '../support/test-database';

const WORKERS = 3;
const JOBS = 300;
const KILLS = 3;
const LEASE_MS = 1000;
const LIMIT = 2; // chaos.limited's globalConcurrency (test/support/chaos-worker.cjs)

/**
 * One run from scratch (own database and workers): the jobs, a kill of a worker running a limited job every 700 ms,
 * then every job completed. Reached when every kill found such a worker and some kill stranded a running execution
 * (a victim may finish its job between the read that chose it and the kill).
 */
async function killScenario(
  client: MongoClient,
  dbNames: string[],
): Promise<ScenarioRun<{ executions: ExecutionRecord[]; killedAt: Map<string, number>; dbName: string }>> {
  const dbName = uniqueDatabaseName('chaos_limit');
  dbNames.push(dbName);
  const db = client.db(dbName);
  const cluster = new ChaosCluster({
    jobsUri: testMongoUri(),
    recordUri: testMongoUri(),
    dbName,
    jobs: { leaseMs: LEASE_MS, pollIntervalMs: 50, concurrency: 3, shutdownGraceMs: 5_000 },
    limited: true,
  });
  let producer: JobsTestApp | undefined;
  try {
    producer = await createJobsTestApp({ dbName, options: { worker: false } });
    const jobs = producer.jobs;
    const workers: ChaosWorker[] = Array.from({ length: WORKERS }, () => cluster.spawn());
    await Promise.all(workers.map((worker) => worker.ready));
    await jobs.enqueueMany(
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
      // found one: a second read could find none (the job finished meanwhile). None while jobs are left: the fleet
      // is between two claims; none with every job completed: the kills came too late on this machine.
      let victim: ChaosWorker | undefined;
      let allCompleted = false;
      await waitFor(
        async () => {
          const running = await db
            .collection('executions')
            .find({ end: { $exists: false } })
            .toArray();
          victim = workers.find((w) => w.alive && w.isReady && running.some((r) => r.workerId === w.id));
          allCompleted = victim === undefined && (await jobs.stats()).completed === JOBS;
          return victim !== undefined || allCompleted;
        },
        'a worker running a limited job',
        30_000,
      );
      if (!victim) return notReached(`every job completed before kill ${i + 1}`);
      victim.kill('SIGKILL');
      killedAt.set(victim.id, Date.now());
      await victim.exited;
      workers[workers.indexOf(victim)] = cluster.spawn();
    }
    let stats = await jobs.stats();
    await cluster.waitFor(
      async () => {
        stats = await jobs.stats();
        return stats.completed === JOBS;
      },
      () => `all ${JOBS} jobs completed (${JSON.stringify(stats)})`,
      90_000,
    );
    expect(cluster.unexpectedExits).toEqual([]);
    const executions = await readExecutions(db);
    if (!executions.some((e) => e.end === undefined)) {
      return notReached('every victim finished its job between the read that chose it and the kill');
    }
    return reached({ executions, killedAt, dbName });
  } finally {
    await cluster.killAll();
    await producer?.close();
  }
}

describe('chaos: a fleet-wide limit while worker processes are SIGKILLed', () => {
  const scratch = scratchDatabases();

  it(
    `${JOBS} jobs with globalConcurrency ${LIMIT} on ${WORKERS} workers, ${KILLS} SIGKILLs: never more than ${LIMIT} live owners, none lost`,
    async () => {
      const { executions, killedAt, dbName } = await untilPreconditionReached(
        'every kill hit a worker running a limited job, and one stranded a running execution',
        () => killScenario(scratch.client, scratch.names),
      );
      // A killed execution was live until its process died.
      const intervals = executions.map((e) => ({ start: e.start, end: e.end ?? killedAt.get(e.workerId) }));
      expect(intervals.every((interval) => interval.end !== undefined)).toBe(true);
      expect(maxOverlap(intervals)).toBe(LIMIT);
      expect(leaseOverlaps(executions)).toEqual([]);
      const rows = await scratch.client.db(dbName).collection('jobs').find({}).toArray();
      expect(rows.filter((row) => row.status !== 'completed')).toEqual([]);
      expect(rows.filter((row) => row.concurrencySlot !== undefined)).toEqual([]);
    },
    3 * 150_000,
  );
});
