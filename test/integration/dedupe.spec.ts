import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { JobHandler } from '../../lib';
import { createJobsTestApp, deferred, type JobsTestApp, waitFor } from '../support/jobs-app';
import { uniqueDatabaseName } from '../support/test-database';

const release = deferred();

@Injectable()
class DedupeHandlers {
  @JobHandler('sync')
  async sync() {
    await release.promise;
  }
}

describe('dedupeKey', () => {
  let producers: JobsTestApp[];

  beforeAll(async () => {
    const dbName = uniqueDatabaseName('dedupe');
    producers = [
      await createJobsTestApp({ dbName, options: { worker: false }, providers: [DedupeHandlers] }),
      await createJobsTestApp({ dbName, options: { worker: false }, providers: [DedupeHandlers] }),
    ];
  });
  afterAll(async () => {
    release.resolve();
    await Promise.all(producers.map((app) => app.close()));
  });

  it('returns one job for 40 concurrent enqueues of the same key from two processes', async () => {
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) => producers[i % 2].jobs.enqueue('sync', { i }, { dedupeKey: 'user:1' })),
    );
    expect(new Set(results.map((job) => job.id)).size).toBe(1);
    expect(await producers[0].connection.collection('jobs').countDocuments({ dedupeKey: 'user:1' })).toBe(1);
  });

  it('returns the running holder, then frees the key once the job finishes', async () => {
    const [a] = producers;
    const job = await a.jobs.enqueue('sync', null, { dedupeKey: 'user:2' });
    const run = a.jobs.runNow(job.id);
    await waitFor(async () => (await a.jobs.findById(job.id))?.status === 'running', 'running');
    expect((await a.jobs.enqueue('sync', null, { dedupeKey: 'user:2' })).id).toBe(job.id);
    release.resolve();
    expect(await run).toMatchObject({ kind: 'executed', job: { status: 'completed', dedupeKey: null } });
    const fresh = await a.jobs.enqueue('sync', null, { dedupeKey: 'user:2' });
    expect(fresh.id).not.toBe(job.id);
  });

  it('enqueueMany resolves keys held already or repeated in the batch to their holder', async () => {
    const [a] = producers;
    const held = await a.jobs.enqueue('sync', null, { dedupeKey: 'batch:held' });
    const results = await a.jobs.enqueueMany([
      { name: 'sync', payload: 1, options: { dedupeKey: 'batch:held' } },
      { name: 'sync', payload: 2, options: { dedupeKey: 'batch:new' } },
      { name: 'sync', payload: 3, options: { dedupeKey: 'batch:new' } },
      { name: 'sync', payload: 4 },
    ]);
    expect(results[0].id).toBe(held.id);
    expect(results[2].id).toBe(results[1].id);
    expect(results[3].payload).toBe(4);
    expect(new Set(results.map((r) => r.id)).size).toBe(3);
  });
});
