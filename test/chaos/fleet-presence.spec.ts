import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import type { MongoClient } from 'mongodb';
import { LIBRARY_VERSION } from '../../lib/model/version';
import { ChaosCluster } from '../support/chaos-cluster';
import { createJobsTestApp, type JobsTestApp, waitFor } from '../support/jobs-app';
import { TcpProxy } from '../support/tcp-proxy';
import { connectTestClient, testMongoUri, uniqueDatabaseName } from '../support/test-database';

describe('chaos: fleet presence of workers that die or lose the database', () => {
  let client: MongoClient;
  const apps: JobsTestApp[] = [];
  let cluster: ChaosCluster | undefined;
  let proxy: TcpProxy | undefined;
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);

  beforeAll(async () => {
    client = await connectTestClient();
    process.on('unhandledRejection', onUnhandled);
  });

  afterEach(async () => {
    await cluster?.killAll();
    await Promise.all(apps.splice(0).map((app) => app.close()));
    await proxy?.close();
    cluster = undefined;
    proxy = undefined;
  });

  afterAll(async () => {
    process.off('unhandledRejection', onUnhandled);
    await client?.close();
  });

  it('a SIGKILLed worker is gone from the list after three missed refreshes, and its document deleted later', async () => {
    const dbName = uniqueDatabaseName('fleet_kill');
    // The survivor refreshes (and cleans up) on its own; the victim runs the built package (dist/).
    const survivor = await createJobsTestApp({ dbName, options: { workerId: 'survivor', pollIntervalMs: 50 } });
    apps.push(survivor);
    cluster = new ChaosCluster({
      jobsUri: testMongoUri(),
      recordUri: testMongoUri(),
      dbName,
      jobs: { pollIntervalMs: 50, concurrency: 2 },
    });
    const victim = cluster.spawn('victim');
    await victim.ready;
    await waitFor(async () => (await survivor.jobs.workers()).length === 2, 'the victim listed');
    const listed = (await survivor.jobs.workers()).find((w) => w.workerId === victim.id);
    expect(listed).toMatchObject({ names: ['chaos.sleep'], concurrency: 2, version: LIBRARY_VERSION });
    expect(listed?.pid).toBe(victim.child.pid);

    victim.kill('SIGKILL');
    await victim.exited;
    const presence = client.db(dbName).collection('jobs_workers');
    await waitFor(async () => (await survivor.jobs.workers()).length === 1, 'the victim gone from the list');
    // Hidden by its age, not deleted yet: the cleanup waits much longer than the reader.
    expect(await presence.countDocuments({ _id: victim.id as never })).toBe(1);
    await waitFor(
      async () => (await presence.countDocuments({ _id: victim.id as never })) === 0,
      "the victim's document deleted",
    );
    expect((await survivor.jobs.workers()).map((w) => w.workerId)).toEqual(['survivor']);
  });

  it('refreshes that fail while the database is unreachable do not crash the worker; it shows again after', async () => {
    const dbName = uniqueDatabaseName('fleet_drop');
    proxy = await TcpProxy.start(testMongoUri());
    const observer = await createJobsTestApp({ dbName, options: { workerId: 'observer', worker: false } });
    apps.push(observer);
    const worker = await createJobsTestApp({
      dbName,
      uri: proxy.uri,
      mongoose: { serverSelectionTimeoutMS: 500, heartbeatFrequencyMS: 500, connectTimeoutMS: 500 },
      options: { workerId: 'cut-off', pollIntervalMs: 50 },
    });
    apps.push(worker);
    await waitFor(async () => (await observer.jobs.workers()).length === 1, 'the worker listed');

    const outage = proxy.drop(2_000);
    // Three refreshes missed: the observer (on a direct connection) no longer lists it.
    await waitFor(async () => (await observer.jobs.workers()).length === 0, 'the cut-off worker unlisted');
    await outage;
    const outageEnded = new Date();
    await waitFor(
      async () => ((await observer.jobs.workers())[0]?.lastSeenAt ?? new Date(0)) > outageEnded,
      'a refresh after the outage',
    );
    expect(unhandled).toEqual([]);
  });
});
