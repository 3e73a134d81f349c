import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { type Connection, Types } from 'mongoose';
import { JobHandler } from '../../lib';
import { createIndexReady } from '../support/indexes';
import { createJobsTestApp, deferred, type JobsTestApp, waitFor } from '../support/jobs-app';
import { uniqueDatabaseName } from '../support/test-database';

const release = deferred();

@Injectable()
class DedupeHandlers {
  @JobHandler('sync')
  async sync() {
    await release.promise;
  }

  @JobHandler('mail')
  async mail() {
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
    // The row keeps the user's key for display (and for retry); only the live holder's scope is freed.
    expect(await run).toMatchObject({ kind: 'executed', job: { status: 'completed', dedupeKey: 'user:2' } });
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

  it('tells the caller whether a job was stored or deduplicated, and emits enqueued once per stored job', async () => {
    const [a] = producers;
    const events: { jobId: string; type: string }[] = [];
    const subscription = a.jobs.events$.subscribe((event) => events.push(event));
    try {
      const first = await a.jobs.enqueue('sync', null, { dedupeKey: 'told:1' });
      const second = await a.jobs.enqueue('sync', null, { dedupeKey: 'told:1' });
      const plain = await a.jobs.enqueue('sync');
      const many = await a.jobs.enqueueMany([
        { name: 'sync', options: { dedupeKey: 'told:1' } },
        { name: 'sync', options: { dedupeKey: 'told:2' } },
        { name: 'sync', options: { dedupeKey: 'told:2' } },
      ]);
      expect([first, second, plain].map((job) => job.deduplicated)).toEqual([false, true, false]);
      expect(second.id).toBe(first.id);
      expect(many.map((job) => job.deduplicated)).toEqual([true, false, true]);
      const enqueued = events.filter((event) => event.type === 'enqueued').map((event) => event.jobId);
      expect(enqueued).toEqual([first.id, plain.id, many[1].id]);
      // A record read back is not an enqueue result: it says nothing about deduplication.
      expect(await a.jobs.findById(first.id)).not.toHaveProperty('deduplicated');
    } finally {
      subscription.unsubscribe();
    }
  });

  it('scopes keys by job name: a key held by another name does not swallow the job', async () => {
    const [a, b] = producers;
    const sync = await a.jobs.enqueue('sync', null, { dedupeKey: 'user-1' });
    const mail = await b.jobs.enqueue('mail', null, { dedupeKey: 'user-1' });
    expect(mail).toMatchObject({ name: 'mail', dedupeKey: 'user-1' });
    expect(mail.id).not.toBe(sync.id);
    expect((await a.jobs.enqueue('mail', null, { dedupeKey: 'user-1' })).id).toBe(mail.id);
    const [many] = await a.jobs.enqueueMany([{ name: 'mail', options: { dedupeKey: 'user-1b' } }]);
    const [other] = await a.jobs.enqueueMany([{ name: 'sync', options: { dedupeKey: 'user-1b' } }]);
    expect(other.id).not.toBe(many.id);
    expect(await a.connection.collection('jobs').countDocuments({ dedupeKey: { $in: ['user-1', 'user-1b'] } })).toBe(4);
  });

  it('retry gives a revived job its key back, so a later enqueue returns it', async () => {
    const [a] = producers;
    const job = await a.jobs.enqueue('sync', null, { dedupeKey: 'revive:1' });
    await a.jobs.cancel(job.id);
    expect(await a.jobs.retry(job.id)).toMatchObject({ id: job.id, status: 'pending', dedupeKey: 'revive:1' });
    expect((await a.jobs.enqueue('sync', null, { dedupeKey: 'revive:1' })).id).toBe(job.id);
  });

  it('retry throws DedupeConflictError naming the live holder of its key, and changes nothing', async () => {
    const [a] = producers;
    const job = await a.jobs.enqueue('sync', null, { dedupeKey: 'revive:2' });
    const cancelled = await a.jobs.cancel(job.id);
    const holder = await a.jobs.enqueue('sync', null, { dedupeKey: 'revive:2' });
    expect(holder.id).not.toBe(job.id);
    await expect(a.jobs.retry(job.id)).rejects.toMatchObject({
      name: 'DedupeConflictError',
      jobId: job.id,
      holderId: holder.id,
    });
    expect(await a.jobs.findById(job.id)).toEqual(cancelled);
    expect((await a.jobs.enqueue('sync', null, { dedupeKey: 'revive:2' })).id).toBe(holder.id);
  });

  it('frees a scope that a worker of an older version left on a finished job, so the key works again', async () => {
    const [a] = producers;
    const job = await a.jobs.enqueue('sync', null, { dedupeKey: 'stale:1' });
    // An older version's completion: it unsets dedupeKey but knows nothing of dedupeScope.
    await a.connection
      .collection('jobs')
      .updateOne({ _id: new Types.ObjectId(job.id) }, { $set: { status: 'completed' }, $unset: { dedupeKey: '' } });
    const fresh = await a.jobs.enqueue('sync', null, { dedupeKey: 'stale:1' });
    expect(fresh.id).not.toBe(job.id);
    expect((await a.jobs.enqueue('sync', null, { dedupeKey: 'stale:1' })).id).toBe(fresh.id);
  });

  it('gives up with DedupeKeyContendedError, storing nothing, when the key is never free nor held', async () => {
    const [a] = producers;
    const job = await a.jobs.enqueue('sync', null, { dedupeKey: 'contended:1' });
    // A finished row keeps the scope, and every attempt to free it loses to another writer putting it back.
    await a.connection
      .collection('jobs')
      .updateOne({ _id: new Types.ObjectId(job.id) }, { $set: { status: 'completed' } });
    const free = a.stores.enqueue.freeStaleScope.bind(a.stores.enqueue);
    let frees = 0;
    a.stores.enqueue.freeStaleScope = async () => {
      frees += 1;
    };
    try {
      const attempt = a.jobs.enqueue('sync', { lost: true }, { dedupeKey: 'contended:1' });
      await expect(attempt).rejects.toMatchObject({ name: 'DedupeKeyContendedError', tries: 5, jobName: 'sync' });
      await expect(attempt).rejects.toHaveProperty('cause.code', 11000);
      expect(frees).toBe(5);
      expect(await a.connection.collection('jobs').countDocuments({ 'payload.lost': true })).toBe(0);
    } finally {
      a.stores.enqueue.freeStaleScope = free;
    }
  });

  it('enqueueMany that gives up on a contended key still announces the items it stored', async () => {
    const [a] = producers;
    const job = await a.jobs.enqueue('sync', null, { dedupeKey: 'contended:batch' });
    await a.connection
      .collection('jobs')
      .updateOne({ _id: new Types.ObjectId(job.id) }, { $set: { status: 'completed' } });
    const free = a.stores.enqueue.freeStaleScope.bind(a.stores.enqueue);
    a.stores.enqueue.freeStaleScope = async () => {};
    const enqueued: string[] = [];
    const subscription = a.jobs.events$.subscribe((event) => {
      if (event.type === 'enqueued') enqueued.push(event.jobId);
    });
    try {
      await expect(
        a.jobs.enqueueMany([
          { name: 'sync', payload: { batch: 'stored-before-contention' } },
          { name: 'sync', options: { dedupeKey: 'contended:batch' } },
        ]),
      ).rejects.toMatchObject({ name: 'DedupeKeyContendedError' });
      const stored = await a.connection.collection('jobs').findOne({ 'payload.batch': 'stored-before-contention' });
      expect(enqueued).toEqual([stored?._id.toHexString()]);
    } finally {
      a.stores.enqueue.freeStaleScope = free;
      subscription.unsubscribe();
    }
  });

  it('retry frees a scope that a worker of an older version left on a finished job, and takes the key back', async () => {
    const [a] = producers;
    const job = await a.jobs.enqueue('sync', null, { dedupeKey: 'stale:2' });
    await a.jobs.cancel(job.id);
    const other = await a.jobs.enqueue('sync', null, { dedupeKey: 'stale:2' });
    // An older version's completion of the other job: it unsets dedupeKey but leaves dedupeScope behind.
    await a.connection
      .collection('jobs')
      .updateOne({ _id: new Types.ObjectId(other.id) }, { $set: { status: 'completed' }, $unset: { dedupeKey: '' } });
    expect(await a.jobs.retry(job.id)).toMatchObject({ id: job.id, status: 'pending', dedupeKey: 'stale:2' });
    expect((await a.jobs.enqueue('sync', null, { dedupeKey: 'stale:2' })).id).toBe(job.id);
  });

  it('enqueueMany resolves every held key with one insert and one lookup', async () => {
    const commands: string[] = [];
    const app = await createJobsTestApp({
      dbName: uniqueDatabaseName('dedupe_trips'),
      options: { worker: false },
      providers: [DedupeHandlers],
      mongoose: {
        monitorCommands: true,
        connectionFactory: (connection: Connection) => {
          connection.getClient().on('commandStarted', (event) => commands.push(event.commandName));
          return connection;
        },
      },
    });
    try {
      const keys = ['trip:1', 'trip:2', 'trip:3'];
      const held = await app.jobs.enqueueMany(keys.map((dedupeKey) => ({ name: 'sync', options: { dedupeKey } })));
      commands.length = 0;
      const again = await app.jobs.enqueueMany(keys.map((dedupeKey) => ({ name: 'sync', options: { dedupeKey } })));
      expect(again.map((job) => job.id)).toEqual(held.map((job) => job.id));
      expect(commands).toEqual(['insert', 'find']);
    } finally {
      await app.close();
    }
  });

  it.each([
    { how: 'enqueue with a dedupeKey', key: 'order:1' },
    { how: 'enqueue without a dedupeKey', key: undefined },
  ])('names a unique index of the application that rejects a job ($how)', async ({ key }) => {
    const [a] = producers;
    const index = `order_unique_${key ? 'keyed' : 'plain'}`;
    await createIndexReady(
      a.connection.collection('jobs'),
      { 'payload.order': 1 },
      { name: index, unique: true, sparse: true },
    );
    try {
      const order = { order: index };
      await a.jobs.enqueue('mail', order, { dedupeKey: key });
      const again = key === undefined ? undefined : `${key}:again`;
      const expected = { name: 'UniqueIndexRejectedJobError', indexName: index, jobName: 'mail' };
      await expect(a.jobs.enqueue('mail', order, { dedupeKey: again })).rejects.toMatchObject(expected);
      await expect(
        a.jobs.enqueueMany([{ name: 'mail', payload: order, options: { dedupeKey: again } }]),
      ).rejects.toMatchObject(expected);
    } finally {
      await a.connection.collection('jobs').dropIndex(index);
    }
  });

  it('enqueueMany rejected on one item by an application index still announces the items it stored', async () => {
    const [a] = producers;
    const index = 'order_unique_batch';
    const jobs = a.connection.collection('jobs');
    await createIndexReady(jobs, { 'payload.order': 1 }, { name: index, unique: true, sparse: true });
    const enqueued: string[] = [];
    const subscription = a.jobs.events$.subscribe((event) => {
      if (event.type === 'enqueued') enqueued.push(event.jobId);
    });
    try {
      await a.jobs.enqueue('mail', { order: 'batch:taken' });
      await expect(
        a.jobs.enqueueMany([
          { name: 'mail', payload: { batch: 'stored-despite-clash' } },
          { name: 'mail', payload: { order: 'batch:taken' } },
        ]),
      ).rejects.toMatchObject({ name: 'UniqueIndexRejectedJobError', indexName: index });
      const stored = await jobs.findOne({ 'payload.batch': 'stored-despite-clash' });
      expect(stored).not.toBeNull();
      // The stored job runs like any other: whoever counts enqueued events must count it too.
      expect(enqueued).toContain(stored?._id.toHexString());
    } finally {
      subscription.unsubscribe();
      await jobs.dropIndex(index);
    }
  });

  it('retry is not repeated, nor refused, for writes to the row that leave its state and deadline alone', async () => {
    const [a] = producers;
    const job = await a.jobs.enqueue('sync', null, { dedupeKey: 'touched:1' });
    await a.jobs.cancel(job.id);
    const readStore = a.stores.read;
    const findById = readStore.findById.bind(readStore);
    let reads = 0;
    // Every read by retry is followed by an unrelated write to the row (as a dashboard's note or a migration would).
    readStore.findById = async (id) => {
      reads += 1;
      const row = await findById(id);
      await a.connection
        .collection('jobs')
        .updateOne({ _id: id }, { $set: { updatedAt: new Date(Date.now() + reads) } });
      return row;
    };
    try {
      expect(await a.jobs.retry(job.id)).toMatchObject({ id: job.id, status: 'pending' });
      expect(reads).toBe(1);
    } finally {
      readStore.findById = findById;
    }
  });

  it('two processes retrying one job at once: one write, and both return the same row', async () => {
    const dbName = uniqueDatabaseName('dedupe_retry_race');
    let revivingWrites = 0;
    const countWrites = (connection: Connection) => {
      connection.getClient().on('commandSucceeded', (event) => {
        const reply = event.reply as { value?: { status?: string }; lastErrorObject?: { n?: number } };
        if (
          event.commandName === 'findAndModify' &&
          reply.lastErrorObject?.n === 1 &&
          reply.value?.status === 'pending'
        )
          revivingWrites += 1;
      });
      return connection;
    };
    const boot = () =>
      createJobsTestApp({
        dbName,
        options: { worker: false },
        providers: [DedupeHandlers],
        mongoose: { monitorCommands: true, connectionFactory: countWrites },
      });
    const apps = [await boot(), await boot()];
    try {
      // Both read the cancelled row before either writes.
      let arrived = 0;
      const bothRead = deferred();
      for (const app of apps) {
        const findById = app.stores.read.findById.bind(app.stores.read);
        app.stores.read.findById = async (id) => {
          const row = await findById(id);
          arrived += 1;
          if (arrived === 2) bothRead.resolve();
          await bothRead.promise;
          return row;
        };
      }
      const job = await apps[0].jobs.enqueue('sync', null, { dedupeKey: 'race:1' });
      await apps[0].jobs.cancel(job.id);
      revivingWrites = 0; // only the retries' writes (the cancel's answers the row as it was before: pending)
      const [first, second] = await Promise.all(apps.map((app) => app.jobs.retry(job.id)));
      expect(revivingWrites).toBe(1);
      expect(first).toMatchObject({ id: job.id, status: 'pending', dedupeKey: 'race:1' });
      expect(second).toEqual(first);
    } finally {
      await Promise.all(apps.map((app) => app.close()));
    }
  });
});
