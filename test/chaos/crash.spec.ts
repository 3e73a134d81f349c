import { describe, expect, it } from '@jest/globals';
import type { MongoClient } from 'mongodb';
import { ChaosCluster, type ChaosWorker } from '../support/chaos-cluster';
import { groupByJob, leaseOverlaps, readExecutions } from '../support/execution-records';
import { createJobsTestApp, waitFor } from '../support/jobs-app';
import { notReached, reached, type ScenarioRun, untilPreconditionReached } from '../support/precondition';
import { scratchDatabases } from '../support/scratch-databases';
import { sleep } from '../support/sleep';
import { testMongoUri, uniqueDatabaseName } from '../support/test-database';

const WORKERS = 3;
const JOBS = 300;
const KILLS = 10;
const LEASE_MS = 1000;
// High enough that no job is dead-lettered by kills alone (each kill costs the jobs it held one attempt).
const MAX_ATTEMPTS = 20;

/**
 * One run from scratch (own database and workers): a random ready worker SIGKILLed (and restarted) every second, every
 * job completed, the survivors shut down cleanly, and the records checked. Reached when every kill came while work was
 * left and some kill caught an execution running.
 */
async function crashScenario(client: MongoClient, dbNames: string[]): Promise<ScenarioRun<number>> {
  const dbName = uniqueDatabaseName('chaos_crash');
  dbNames.push(dbName);
  const cluster = new ChaosCluster({
    jobsUri: testMongoUri(),
    recordUri: testMongoUri(),
    dbName,
    jobs: { leaseMs: LEASE_MS, pollIntervalMs: 50, concurrency: 3, shutdownGraceMs: 5_000 },
  });
  // Enqueue-only app in the test process; the workers are separate processes on the built package.
  const producer = await createJobsTestApp({ dbName, options: { worker: false } });
  try {
    const workers: ChaosWorker[] = Array.from({ length: WORKERS }, () => cluster.spawn());
    await Promise.all(workers.map((worker) => worker.ready));
    const enqueued = await producer.jobs.enqueueMany(
      Array.from({ length: JOBS }, () => ({
        name: 'chaos.sleep',
        payload: { ms: 50 + Math.floor(Math.random() * 450) },
        options: { maxAttempts: MAX_ATTEMPTS },
      })),
    );

    const kills: { worker: string; at: number; unfinished: number }[] = [];
    for (let i = 0; i < KILLS; i += 1) {
      await sleep(1000);
      // Only a booted worker holds jobs worth killing; a replacement may still be starting.
      await waitFor(() => workers.some((w) => w.isReady && w.alive), 'a ready worker', 30_000);
      const candidates = workers.filter((w) => w.isReady && w.alive);
      const victim = candidates[Math.floor(Math.random() * candidates.length)];
      const { completed } = await producer.jobs.stats();
      // A kill with no work left proves nothing: the kills came too late on this machine.
      if (completed === JOBS) return notReached(`every job completed before kill ${i + 1}`);
      victim.kill('SIGKILL');
      kills.push({ worker: victim.id, at: Date.now(), unfinished: JOBS - completed });
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
      60_000,
    );
    // Every kill happened while there was work left (checked at each kill, above).
    expect(kills.map((kill) => kill.unfinished > 0)).toEqual(Array(KILLS).fill(true));

    // No worker died but those the test killed, and the survivors shut down cleanly.
    expect(cluster.unexpectedExits).toEqual([]);
    const survivors = cluster.alive;
    expect(survivors).toHaveLength(WORKERS);
    for (const worker of survivors) worker.kill('SIGTERM');
    const exits = await Promise.all(survivors.map((worker) => worker.exited));
    expect(exits).toEqual(Array(WORKERS).fill({ code: 0, signal: null }));

    const db = client.db(dbName);
    const rows = await db
      .collection('jobs')
      .find({}, { projection: { status: 1, attemptCount: 1, fencingToken: 1, attempts: 1, lockedBy: 1 } })
      .toArray();
    expect(rows).toHaveLength(JOBS);
    expect(new Set(rows.map((row) => row._id.toHexString()))).toEqual(new Set(enqueued.map((job) => job.id)));
    expect(rows.filter((row) => row.status !== 'completed')).toEqual([]);
    for (const row of rows) {
      // The only lost attempts are reclaims after a kill, and each claim took a new fencing token.
      expect(row.attempts.map((a: { errorClass: string }) => a.errorClass)).toEqual(
        Array(row.attemptCount).fill('LeaseExpired'),
      );
      expect(row.fencingToken).toBe(row.attemptCount + 1);
    }
    const executions = await readExecutions(db);
    const byJob = groupByJob(executions);
    expect(byJob.size).toBe(JOBS);
    for (const row of rows) {
      const list = byJob.get(row._id.toHexString()) ?? [];
      const last = list[list.length - 1];
      // The completing execution is the row's last owner, and it ran to its end.
      expect(last).toMatchObject({ fencingToken: row.fencingToken, stale: false });
      expect(last.end).toEqual(expect.any(Number));
      expect(list.length).toBeLessThanOrEqual(row.fencingToken);
    }
    expect(leaseOverlaps(executions)).toEqual([]);
    // Each killed execution (no end) was succeeded by a later token; some happened, or the run proved little.
    const killed = executions.filter((e) => e.end === undefined);
    for (const e of killed) {
      const list = byJob.get(e.jobId) ?? [];
      expect(list[list.length - 1].fencingToken).toBeGreaterThan(e.fencingToken);
    }
    if (killed.length === 0) return notReached('no kill caught an execution running');
    // Each execution a kill cut short is a lost attempt, counted when its job was reclaimed. (A victim idle at its kill
    // loses nothing: on a loaded machine that happens, so the kills themselves are not the count.)
    const reclaims = rows.reduce((sum, row) => sum + row.attemptCount, 0);
    expect(reclaims).toBeGreaterThanOrEqual(killed.length);
    return reached(killed.length);
  } finally {
    await cluster.killAll();
    await producer.close();
  }
}

describe('chaos: worker processes SIGKILLed while they run jobs', () => {
  const scratch = scratchDatabases();

  it(
    `${JOBS} jobs, ${WORKERS} workers, one SIGKILLed (and restarted) every second ${KILLS} times: none lost, no overlapping owners`,
    async () => {
      const killed = await untilPreconditionReached(
        'every kill came while work was left, and some kill caught an execution running',
        () => crashScenario(scratch.client, scratch.names),
      );
      expect(killed).toBeGreaterThan(0);
    },
    3 * 120_000,
  );
});
