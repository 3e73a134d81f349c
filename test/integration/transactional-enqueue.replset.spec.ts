import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import type { ClientSession } from 'mongoose';
import { type JobEvent, JobHandler } from '../../lib';
import { createJobsTestApp, deferred, type JobsTestApp } from '../support/jobs-app';
import { detectTransactionSupport } from '../support/server-capabilities';
import { uniqueDatabaseName } from '../support/test-database';

@Injectable()
class OrderHandlers {
  @JobHandler('order.confirm')
  async confirm() {}
}

/**
 * Atomicity of `enqueue(…, { session })` on a real server: needs transactions, detected from the server's hello
 * (sessions on a replica-set member or a router), e.g. `MONGODB_URI=mongodb://localhost:27017/?replicaSet=rs0 npm test
 * -- transactional`. Anywhere else the file is skipped visibly, its reason in the name, and counted as skipped (the
 * wire-level tests in transactional-enqueue.spec.ts still run).
 */
const transactions = await detectTransactionSupport();
const describeWithTransactions = transactions.supported ? describe : describe.skip;

describeWithTransactions(`enqueue inside a real transaction (${transactions.reason})`, () => {
  let app: JobsTestApp;
  let events: JobEvent[] = [];

  beforeAll(async () => {
    app = await createJobsTestApp({
      dbName: uniqueDatabaseName('txn_replset'),
      options: { worker: false },
      providers: [OrderHandlers],
    });
    // A collection cannot be created inside a transaction on servers before 4.4: create both up front.
    await app.connection.createCollection('orders');
    app.jobs.events$.subscribe((event) => events.push(event));
  });
  afterAll(async () => {
    await app?.close();
  });

  const orders = () => app.connection.collection('orders');
  const placeOrder = async (session: ClientSession, orderId: string) => {
    await orders().insertOne({ orderId }, { session });
    return app.jobs.enqueue('order.confirm', { orderId }, { session });
  };

  it('commits the job with the caller’s write; invisible outside before, announced after', async () => {
    events = [];
    let seenOutside: unknown = 'not read';
    const job = await app.connection.transaction(async (session) => {
      const stored = await placeOrder(session, 'committed');
      seenOutside = await app.jobs.findById(stored.id);
      expect(events).toEqual([]);
      return stored;
    });
    expect(seenOutside).toBeNull();
    expect(await app.jobs.findById(job.id)).toMatchObject({ status: 'pending', payload: { orderId: 'committed' } });
    expect(await orders().countDocuments({ orderId: 'committed' })).toBe(1);
    expect(events).toMatchObject([{ type: 'enqueued', jobId: job.id }]);
  });

  it('rolls the job back with the caller’s write when the transaction aborts, and announces nothing', async () => {
    events = [];
    let ids: string[] = [];
    await expect(
      app.connection.transaction(async (session) => {
        ids = [(await placeOrder(session, 'aborted')).id];
        const many = await app.jobs.enqueueMany(
          [{ name: 'order.confirm' }, { name: 'order.confirm', options: { dedupeKey: 'aborted' } }],
          { session },
        );
        ids.push(...many.map((job) => job.id));
        throw new Error('payment declined');
      }),
    ).rejects.toThrow('payment declined');
    expect(ids).toHaveLength(3);
    for (const id of ids) expect(await app.jobs.findById(id)).toBeNull();
    expect(await orders().countDocuments({ orderId: 'aborted' })).toBe(0);
    expect(events).toEqual([]);
  });

  it('returns the live holder of a dedupe key inside a transaction without aborting it', async () => {
    const holder = await app.jobs.enqueue('order.confirm', null, { dedupeKey: 'held' });
    const result = await app.connection.transaction(async (session) => {
      await orders().insertOne({ orderId: 'with-held-key' }, { session });
      return app.jobs.enqueue('order.confirm', null, { session, dedupeKey: 'held' });
    });
    expect(result).toMatchObject({ id: holder.id, deduplicated: true });
    expect(await orders().countDocuments({ orderId: 'with-held-key' })).toBe(1);
  });

  it('throttle and debounce inside a transaction: the holder returned, the replacement rolled back with it', async () => {
    const throttle = { key: 'txn-throttle', windowMs: 3_600_000 };
    const debounce = { key: 'txn-debounce', windowMs: 3_600_000 };
    const throttled = await app.jobs.enqueue('order.confirm', 'outside', { throttle });
    const debounced = await app.jobs.enqueue('order.confirm', 'outside', { debounce });
    const inside = await app.connection.transaction(async (session) => {
      await orders().insertOne({ orderId: 'with-windows' }, { session });
      return [
        await app.jobs.enqueue('order.confirm', 'inside', { session, throttle }),
        await app.jobs.enqueue('order.confirm', 'inside', { session, debounce }),
      ];
    });
    expect(inside.map((job) => [job.id, job.deduplicated])).toEqual([
      [throttled.id, true],
      [debounced.id, true],
    ]);
    expect(await app.jobs.findById(debounced.id)).toMatchObject({ payload: 'inside' });
    await expect(
      app.connection.transaction(async (session) => {
        await app.jobs.enqueue('order.confirm', 'rolled back', { session, debounce });
        throw new Error('abort');
      }),
    ).rejects.toThrow('abort');
    expect(await app.jobs.findById(debounced.id)).toMatchObject({ payload: 'inside' });
  });

  it('a throttled and a debounced job stored inside a transaction exist, and are announced, only once it commits', async () => {
    events = [];
    const windows = [
      { throttle: { key: 'txn-new-t', windowMs: 3_600_000 } },
      { debounce: { key: 'txn-new-d', windowMs: 3_600_000 } },
    ];
    const stored = await app.connection.transaction(async (session) => {
      const jobs = [];
      for (const options of windows) jobs.push(await app.jobs.enqueue('order.confirm', null, { session, ...options }));
      expect(events).toEqual([]);
      return jobs;
    });
    expect(stored.map((job) => job.deduplicated)).toEqual([false, false]);
    for (const job of stored) expect(await app.jobs.findById(job.id)).toMatchObject({ status: 'pending' });
    expect(events.map((event) => event.jobId)).toEqual(stored.map((job) => job.id));
  });

  it('two transactions taking one key: the second conflicts, retries after the first commits, and dedupes', async () => {
    const firstHolds = deferred();
    const secondTried = deferred();
    let secondAttempts = 0;
    const first = app.connection.transaction(async (session) => {
      const job = await app.jobs.enqueue('order.confirm', { by: 'first' }, { session, dedupeKey: 'contended' });
      firstHolds.resolve();
      await secondTried.promise; // holds the key uncommitted while the second transaction tries to take it
      return job;
    });
    await firstHolds.promise;
    const second = app.connection.transaction(async (session) => {
      secondAttempts += 1;
      try {
        return await app.jobs.enqueue('order.confirm', { by: 'second' }, { session, dedupeKey: 'contended' });
      } finally {
        secondTried.resolve();
      }
    });
    const [stored, deduplicated] = await Promise.all([first, second]);
    expect(stored.deduplicated).toBe(false);
    expect(deduplicated).toMatchObject({ id: stored.id, deduplicated: true });
    expect(secondAttempts).toBeGreaterThan(1);
  });
});
