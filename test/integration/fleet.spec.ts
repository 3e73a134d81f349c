import { hostname } from 'node:os';
import { afterEach, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { type JobExecutionContext, JobHandler } from '../../lib';
import { LIBRARY_VERSION } from '../../lib/model/version';
import { createJobsTestApp, deferred, type JobsTestApp, waitFor } from '../support/jobs-app';
import { uniqueDatabaseName } from '../support/test-database';

let release = deferred();

@Injectable()
class MailHandlers {
  @JobHandler('mail.send')
  async send(_payload: unknown, _ctx: JobExecutionContext) {
    await release.promise;
  }

  @JobHandler('mail.bounce')
  async bounce() {}
}

@Injectable()
class ReportHandlers {
  @JobHandler('report.build')
  async build() {}
}

describe('fleet view: JobsService.workers()', () => {
  const apps: JobsTestApp[] = [];
  afterEach(async () => {
    release.resolve();
    release = deferred();
    await Promise.all(apps.splice(0).map((app) => app.close()));
  });

  const start = async (dbName: string, options: object, providers: unknown[] = [MailHandlers]) => {
    const app = await createJobsTestApp({ dbName, options, providers: providers as never });
    apps.push(app);
    return app;
  };

  it('lists every worker process on the collection with its names and concurrency, sorted by workerId', async () => {
    const dbName = uniqueDatabaseName('fleet_list');
    await start(dbName, { workerId: 'w-b', concurrency: 3, runOnly: ['mail.send'] });
    await start(dbName, { workerId: 'w-a', concurrency: 5 }, [MailHandlers, ReportHandlers]);
    const producer = await start(dbName, { workerId: 'producer', worker: false });
    // Both listed, each with a refresh written after it read the pauses (before that, `paused` is absent).
    const listed = async () => (await producer.jobs.workers()).filter((w) => w.paused !== undefined).length === 2;
    await waitFor(listed, 'two workers listed');
    const workers = await producer.jobs.workers();
    expect(workers.map((w) => w.workerId)).toEqual(['w-a', 'w-b']);
    expect(workers[0]).toEqual({
      workerId: 'w-a',
      host: hostname(),
      pid: process.pid,
      startedAt: expect.any(Date),
      lastSeenAt: expect.any(Date),
      concurrency: 5,
      names: ['mail.bounce', 'mail.send', 'report.build'],
      paused: [],
      running: 0,
      version: LIBRARY_VERSION,
    });
    expect(workers[1]).toMatchObject({ workerId: 'w-b', concurrency: 3, names: ['mail.send'] });
    expect(LIBRARY_VERSION).toMatch(/^\d+\.\d+\.\d+/);
  });

  it('reports the running count and keeps lastSeenAt fresh', async () => {
    const dbName = uniqueDatabaseName('fleet_running');
    const worker = await start(dbName, { workerId: 'busy', concurrency: 2 });
    await worker.jobs.enqueue('mail.send', {});
    await waitFor(async () => (await worker.jobs.workers())[0]?.running === 1, 'running count 1');
    const seen = (await worker.jobs.workers())[0].lastSeenAt;
    await waitFor(async () => (await worker.jobs.workers())[0].lastSeenAt > seen, 'a later refresh');
    release.resolve();
    await waitFor(async () => (await worker.jobs.workers())[0]?.running === 0, 'running count back to 0');
  });

  it('drops a worker as soon as it shut down gracefully, and removes its document', async () => {
    const dbName = uniqueDatabaseName('fleet_close');
    const stays = await start(dbName, { workerId: 'stays' });
    const leaves = await start(dbName, { workerId: 'leaves' });
    await waitFor(async () => (await stays.jobs.workers()).length === 2, 'two workers listed');
    await leaves.close();
    apps.splice(apps.indexOf(leaves), 1);
    expect((await stays.jobs.workers()).map((w) => w.workerId)).toEqual(['stays']);
    expect(await stays.connection.collection('jobs_workers').countDocuments({ _id: 'leaves' as never })).toBe(0);
  });

  it('reports the start of the current process when a crashed one with the same workerId left its document', async () => {
    const dbName = uniqueDatabaseName('fleet_restart');
    const producer = await start(dbName, { workerId: 'producer', worker: false });
    const crashedAt = new Date(Date.now() - 3_600_000);
    // A stable workerId (say, the pod name) whose previous process died without removing its presence.
    await producer.connection.collection('jobs_workers').insertOne({
      _id: 'stable' as never,
      startedAt: crashedAt,
      lastSeenAt: crashedAt,
      liveUntil: crashedAt,
      removeAfter: new Date(Date.now() + 3_600_000),
    });
    const bootedAfter = new Date();
    await start(dbName, { workerId: 'stable' });
    await waitFor(async () => (await producer.jobs.workers()).length === 1, 'the restarted worker listed');
    expect((await producer.jobs.workers())[0].startedAt.getTime()).toBeGreaterThanOrEqual(bootedAfter.getTime());
  });

  it('a producer-only process writes no presence but lists the fleet', async () => {
    const dbName = uniqueDatabaseName('fleet_producer');
    const producer = await start(dbName, { workerId: 'producer', worker: false });
    expect(await producer.jobs.workers()).toEqual([]);
    await start(dbName, { workerId: 'worker' });
    await waitFor(async () => (await producer.jobs.workers()).length === 1, 'the worker listed');
    expect((await producer.jobs.workers())[0].workerId).toBe('worker');
    expect(await producer.connection.collection('jobs_workers').countDocuments({})).toBe(1);
  });

  it('uses the sibling collection of a custom collectionName', async () => {
    const dbName = uniqueDatabaseName('fleet_custom');
    const worker = await start(dbName, { workerId: 'custom', collectionName: 'tasks' });
    await waitFor(async () => (await worker.jobs.workers()).length === 1, 'the worker listed');
    expect(await worker.connection.collection('tasks_workers').countDocuments({ _id: 'custom' as never })).toBe(1);
  });
});
