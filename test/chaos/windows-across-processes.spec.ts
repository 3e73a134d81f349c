import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Types } from 'mongoose';
import { ChaosCluster, type ChaosWorker } from '../support/chaos-cluster';
import { createJobsTestApp, type JobsTestApp } from '../support/jobs-app';
import { testMongoUri, uniqueDatabaseName } from '../support/test-database';

const HOUR = 3_600_000;

/**
 * Throttle and debounce keys enqueued from three processes at once: this one and two processes running the built
 * package. The unique indexes decide, never one process's memory.
 */
describe('throttle and debounce keys across processes', () => {
  let here: JobsTestApp;
  let cluster: ChaosCluster;
  let others: ChaosWorker[];

  beforeAll(async () => {
    const dbName = uniqueDatabaseName('windows_procs');
    here = await createJobsTestApp({ dbName, options: { worker: false, workerId: 'here' } });
    // Enqueue-only processes (no poll loop): the jobs stay as the enqueues left them.
    cluster = new ChaosCluster({ jobsUri: testMongoUri(), recordUri: testMongoUri(), dbName, jobs: { worker: false } });
    others = [cluster.spawn('p1'), cluster.spawn('p2')];
    await Promise.all(others.map((worker) => worker.ready));
  }, 60_000);
  afterAll(async () => {
    await cluster.killAll();
    await here.close();
  });

  it('a throttle key is held across processes: 30 concurrent enqueues of one window store one job', async () => {
    const throttle = { key: `t-${new Types.ObjectId().toHexString()}`, windowMs: HOUR };
    const runAt = new Date(Date.now() + 2 * HOUR);
    const results = await Promise.all(
      Array.from({ length: 30 }, (_, i) => {
        const options = { runAt, throttle, strict: false };
        return i % 3 === 0
          ? here.jobs.enqueue('chaos.sleep', { i }, options)
          : others[i % 3 === 1 ? 0 : 1].enqueue('chaos.sleep', { i }, options);
      }),
    );
    expect(new Set(results.map((job) => job.id)).size).toBe(1);
    expect(results.filter((job) => !job.deduplicated)).toHaveLength(1);
    expect(await here.connection.collection('jobs').countDocuments({ runAt })).toBe(1);
  });

  it('a debounce replaces the payload that another process enqueued, and moves its runAt', async () => {
    const debounce = { key: `d-${new Types.ObjectId().toHexString()}`, windowMs: HOUR };
    const first = await others[0].enqueue('chaos.sleep', { from: 'p1' }, { debounce, strict: false });
    const second = await here.jobs.enqueue('chaos.sleep', { from: 'here' }, { debounce, strict: false });
    const third = await others[1].enqueue('chaos.sleep', { from: 'p2' }, { debounce, strict: false });
    expect(first.deduplicated).toBe(false);
    expect([second, third].map((job) => [job.id, job.deduplicated])).toEqual([
      [first.id, true],
      [first.id, true],
    ]);
    expect(new Date(third.runAt).getTime()).toBeGreaterThanOrEqual(new Date(first.runAt).getTime());
    expect(await here.jobs.findById(first.id)).toMatchObject({ status: 'pending', payload: { from: 'p2' } });
  });

  it('keeps one pending debounced job for 30 concurrent enqueues from three processes', async () => {
    const debounce = { key: `c-${new Types.ObjectId().toHexString()}`, windowMs: HOUR };
    const results = await Promise.all(
      Array.from({ length: 30 }, (_, i) => {
        const options = { debounce, strict: false };
        return i % 3 === 0
          ? here.jobs.enqueue('chaos.sleep', { i }, options)
          : others[i % 3 === 1 ? 0 : 1].enqueue('chaos.sleep', { i }, options);
      }),
    );
    expect(new Set(results.map((job) => job.id)).size).toBe(1);
    expect(results.filter((job) => !job.deduplicated)).toHaveLength(1);
    expect(cluster.unexpectedExits).toEqual([]);
  });
});
