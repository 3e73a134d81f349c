import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import type { Connection } from 'mongoose';
import { JobHandler } from '../../lib';
import { createJobsTestApp, type JobsTestApp, waitFor } from '../support/jobs-app';
import { monitoredApp } from '../support/monitored-app';
import { uniqueDatabaseName } from '../support/test-database';

@Injectable()
class ThrottledHandlers {
  readonly seen: unknown[] = [];

  @JobHandler('digest')
  async digest(payload: unknown) {
    this.seen.push(payload);
  }

  @JobHandler('report')
  async report() {}
}

const MINUTE = 60_000;
/** The start of a one-minute window a day from now: runAt chooses the window, so no test waits for a clock edge. */
const windowStart = (k: number) => new Date((Math.floor(Date.now() / MINUTE) + 24 * 60 + k) * MINUTE);

describe('throttle: at most one job per key and window', () => {
  let producers: JobsTestApp[];
  let worker: JobsTestApp;
  let connection: Connection;
  const rows = (filter: object) => connection.collection('jobs').find(filter).toArray();

  beforeAll(async () => {
    const dbName = uniqueDatabaseName('throttle');
    producers = await Promise.all(
      [0, 1].map(() => createJobsTestApp({ dbName, options: { worker: false }, providers: [ThrottledHandlers] })),
    );
    worker = await createJobsTestApp({ dbName, providers: [ThrottledHandlers] });
    connection = producers[0].connection;
  });
  afterAll(async () => {
    await Promise.all([...producers, worker].map((app) => app.close()));
  });

  it('stores one job for 40 concurrent enqueues of a key in one window from two apps, and returns it to all', async () => {
    const runAt = windowStart(0);
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        producers[i % 2].jobs.enqueue('report', { i }, { runAt, throttle: { key: 'k40', windowMs: MINUTE } }),
      ),
    );
    expect(new Set(results.map((job) => job.id)).size).toBe(1);
    expect(results.filter((job) => !job.deduplicated)).toHaveLength(1);
    expect(await rows({ name: 'report', runAt })).toHaveLength(1);
  });

  it('keeps the window after its job finished: a later enqueue returns the completed job', async () => {
    const { jobs } = producers[0];
    const first = await jobs.enqueue('digest', 'first', { throttle: { key: 'done', windowMs: 10 * MINUTE } });
    await waitFor(async () => (await jobs.findById(first.id))?.status === 'completed', 'the job completed');
    const again = await jobs.enqueue('digest', 'second', { throttle: { key: 'done', windowMs: 10 * MINUTE } });
    expect(again).toMatchObject({ id: first.id, deduplicated: true, status: 'completed', payload: 'first' });
    expect(await rows({ payload: 'second' })).toEqual([]);
  });

  it('stores one job per window: the next window, another key, another name or another window length', async () => {
    const { jobs } = producers[0];
    const throttle = { key: 'w', windowMs: MINUTE };
    const a = await jobs.enqueue('report', 1, { runAt: windowStart(0), throttle });
    const sameWindow = await jobs.enqueue('report', 2, { runAt: new Date(windowStart(1).getTime() - 1), throttle });
    const nextWindow = await jobs.enqueue('report', 3, { runAt: windowStart(1), throttle });
    const otherKey = await jobs.enqueue('report', 4, { runAt: windowStart(0), throttle: { ...throttle, key: 'w2' } });
    const otherName = await jobs.enqueue('digest', 5, { runAt: windowStart(0), throttle });
    const otherLength = await jobs.enqueue('report', 6, { runAt: windowStart(0), throttle: { key: 'w', windowMs: 1 } });
    expect(sameWindow).toMatchObject({ id: a.id, deduplicated: true });
    const stored = [a, nextWindow, otherKey, otherName, otherLength];
    expect(stored.map((job) => job.deduplicated)).toEqual([false, false, false, false, false]);
    expect(new Set(stored.map((job) => job.id)).size).toBe(5);
  });

  it('emits enqueued only for the job it stored', async () => {
    const { jobs } = producers[0];
    const events: string[] = [];
    const subscription = jobs.events$.subscribe((event) => {
      if (event.type === 'enqueued') events.push(event.jobId);
    });
    try {
      const throttle = { key: 'events', windowMs: MINUTE };
      const first = await jobs.enqueue('report', null, { runAt: windowStart(0), throttle });
      await jobs.enqueue('report', null, { runAt: windowStart(0), throttle });
      expect(events).toEqual([first.id]);
    } finally {
      subscription.unsubscribe();
    }
  });

  it('enqueueMany: a key repeated in the batch, or held already, resolves to the window’s job', async () => {
    const { jobs } = producers[0];
    const runAt = windowStart(0);
    const throttle = { key: 'many', windowMs: MINUTE };
    const held = await jobs.enqueue('report', 'held', { runAt, throttle: { key: 'many-held', windowMs: MINUTE } });
    const results = await jobs.enqueueMany([
      { name: 'report', payload: 1, options: { runAt, throttle } },
      { name: 'report', payload: 2 },
      { name: 'report', payload: 3, options: { runAt, throttle } },
      { name: 'report', payload: 4, options: { runAt, throttle: { key: 'many-held', windowMs: MINUTE } } },
    ]);
    expect(results.map((job) => job.deduplicated)).toEqual([false, false, true, true]);
    expect(results[2].id).toBe(results[0].id);
    expect(results[3].id).toBe(held.id);
    expect(results[1].payload).toBe(2);
  });

  it('an index the application created that rejects the job is named, and never passes for a held window', async () => {
    const { jobs } = producers[0];
    await connection
      .collection('jobs')
      .createIndex({ 'payload.orderId': 1 }, { name: 'app_order', unique: true, sparse: true });
    const payload = { orderId: 'o-1' };
    await jobs.enqueue('report', payload, { runAt: windowStart(0), throttle: { key: 'app-a', windowMs: MINUTE } });
    const throttled = jobs.enqueue('report', payload, {
      runAt: windowStart(0),
      throttle: { key: 'app-b', windowMs: MINUTE },
    });
    await expect(throttled).rejects.toMatchObject({ name: 'UniqueIndexRejectedJobError', indexName: 'app_order' });
    const debounced = jobs.enqueue('report', payload, { debounce: { key: 'app-c', windowMs: MINUTE } });
    await expect(debounced).rejects.toMatchObject({ name: 'UniqueIndexRejectedJobError', indexName: 'app_order' });
    // A replacement refused the same way leaves the pending job's payload as it was.
    const pending = await jobs.enqueue('report', { orderId: 'o-2' }, { debounce: { key: 'app-d', windowMs: MINUTE } });
    const replaced = jobs.enqueue('report', payload, { debounce: { key: 'app-d', windowMs: MINUTE } });
    await expect(replaced).rejects.toMatchObject({ name: 'UniqueIndexRejectedJobError', indexName: 'app_order' });
    expect(await jobs.findById(pending.id)).toMatchObject({ payload: { orderId: 'o-2' } });
    expect(await rows({ 'payload.orderId': 'o-1' })).toHaveLength(1);
  });

  it('costs one command per enqueue, stored or not', async () => {
    const { app, commands } = await monitoredApp(uniqueDatabaseName('throttle_cost'));
    try {
      const throttle = { key: 'cost', windowMs: MINUTE };
      commands.length = 0;
      await app.jobs.enqueue('report', null, { runAt: windowStart(0), throttle });
      await app.jobs.enqueue('report', null, { runAt: windowStart(0), throttle });
      expect(commands.filter((name) => name !== 'hello' && name !== 'ping')).toEqual([
        'findAndModify',
        'findAndModify',
      ]);
    } finally {
      await app.close();
    }
  });

  it('a retried job keeps its window: the retry revives the same row, and the window stays taken', async () => {
    const { jobs } = producers[0];
    const throttle = { key: 'retry', windowMs: 10 * MINUTE };
    const job = await jobs.enqueue('report', null, { runAt: windowStart(0), throttle });
    await jobs.cancel(job.id);
    expect(await jobs.retry(job.id)).toMatchObject({ id: job.id, status: 'pending' });
    expect(await jobs.enqueue('report', null, { runAt: windowStart(0), throttle })).toMatchObject({
      id: job.id,
      deduplicated: true,
    });
  });
});
