import { afterEach, describe, expect, it } from '@jest/globals';
import { ChaosCluster } from '../support/chaos-cluster';
import { createJobsTestApp, type JobsTestApp, waitFor } from '../support/jobs-app';
import { testMongoUri, uniqueDatabaseName } from '../support/test-database';

describe('pause across processes', () => {
  const apps: JobsTestApp[] = [];
  let cluster: ChaosCluster | undefined;

  afterEach(async () => {
    await cluster?.killAll();
    await Promise.all(apps.splice(0).map((app) => app.close()));
    cluster = undefined;
  });

  it('a pause made in this process is honoured by a worker process (the built package); resume runs the jobs', async () => {
    const dbName = uniqueDatabaseName('pause_procs');
    const operator = await createJobsTestApp({ dbName, options: { workerId: 'operator', worker: false } });
    apps.push(operator);
    cluster = new ChaosCluster({
      jobsUri: testMongoUri(),
      recordUri: testMongoUri(),
      dbName,
      jobs: { pollIntervalMs: 50, concurrency: 2 },
      limited: true, // chaos.limited: the control name
    });
    const worker = cluster.spawn('worker');
    await worker.ready;

    await operator.jobs.pause('chaos.sleep');
    await waitFor(
      async () => (await operator.jobs.workers())[0]?.paused?.includes('chaos.sleep') === true,
      'the worker process to report the pause',
    );
    const paused = await Promise.all([1, 2].map(() => operator.jobs.enqueue('chaos.sleep', { ms: 0 })));
    // Due after the paused jobs: once it ran, the worker had every chance to claim them.
    const control = await operator.jobs.enqueue('chaos.limited', { ms: 0 });
    await waitFor(async () => (await operator.jobs.findById(control.id))?.status === 'completed', 'the control job');
    for (const job of paused) expect(await operator.jobs.findById(job.id)).toMatchObject({ status: 'pending' });

    await operator.jobs.resume('chaos.sleep');
    for (const job of paused) {
      await waitFor(async () => (await operator.jobs.findById(job.id))?.status === 'completed', 'the resumed jobs');
    }
    expect(cluster.unexpectedExits).toEqual([]);
  });
});
