import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { type Connection, Types } from 'mongoose';
import { JobHandler } from '../../lib';
import { createJobsTestApp, deferred, type JobsTestApp, waitFor } from '../support/jobs-app';
import { monitoredApp } from '../support/monitored-app';
import { notReached, reached, untilPreconditionReached } from '../support/precondition';
import { uniqueDatabaseName } from '../support/test-database';

const HOUR = 3_600_000;

@Injectable()
class DebouncedHandlers {
  readonly calls: { payload: unknown; jobId: string }[] = [];
  gate = deferred();

  @JobHandler('reindex')
  async reindex(payload: unknown, ctx: { jobId: string }) {
    this.calls.push({ payload, jobId: ctx.jobId });
    if (payload === 'hold') await this.gate.promise;
  }

  /** Never run by the worker here: its jobs stay pending, so the tests read them as enqueue left them. */
  @JobHandler('idle')
  async idle() {}
}

describe('debounce: one pending job per key, run once the key is quiet', () => {
  let producers: JobsTestApp[];
  let worker: JobsTestApp;
  let handlers: DebouncedHandlers;
  let connection: Connection;
  const row = (id: string) => connection.collection('jobs').findOne({ _id: new Types.ObjectId(id) });

  beforeAll(async () => {
    const dbName = uniqueDatabaseName('debounce');
    producers = await Promise.all(
      [0, 1].map(() => createJobsTestApp({ dbName, options: { worker: false }, providers: [DebouncedHandlers] })),
    );
    worker = await createJobsTestApp({ dbName, providers: [DebouncedHandlers], options: { runOnly: ['reindex'] } });
    handlers = worker.get(DebouncedHandlers);
    connection = producers[0].connection;
  });
  afterAll(async () => {
    handlers.gate.resolve();
    await Promise.all([...producers, worker].map((app) => app.close()));
  });

  it('stores the job due a window from now; a later enqueue replaces its payload and moves its runAt', async () => {
    const { jobs } = producers[0];
    const before = Date.now();
    const first = await jobs.enqueue('idle', { v: 1 }, { debounce: { key: 'a', windowMs: HOUR } });
    expect(first.deduplicated).toBe(false);
    expect(first.runAt.getTime()).toBeGreaterThanOrEqual(before + HOUR);
    const second = await producers[1].jobs.enqueue('idle', { v: 2 }, { debounce: { key: 'a', windowMs: HOUR } });
    expect(second).toMatchObject({ id: first.id, deduplicated: true, payload: { v: 2 }, status: 'pending' });
    expect(second.runAt.getTime()).toBeGreaterThanOrEqual(first.runAt.getTime());
    expect(await row(first.id)).toMatchObject({ payload: { v: 2 }, runAt: second.runAt });
    expect(await connection.collection('jobs').countDocuments({ name: 'idle', payload: { v: 1 } })).toBe(0);
  });

  it('keeps one pending job for 40 concurrent enqueues from two apps, holding one of their payloads', async () => {
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        producers[i % 2].jobs.enqueue('idle', { i }, { debounce: { key: 'burst', windowMs: HOUR } }),
      ),
    );
    const ids = new Set(results.map((job) => job.id));
    expect(ids.size).toBe(1);
    expect(results.filter((job) => !job.deduplicated)).toHaveLength(1);
    const [id] = ids;
    const stored = await row(id);
    expect(results.map((job) => job.payload)).toContainEqual(stored?.payload);
  });

  it('moves runAt no later than maxWaitMs after the first enqueue, and still replaces the payload past it', async () => {
    const { jobs } = producers[0];
    const first = await jobs.enqueue('idle', 1, { debounce: { key: 'capped', windowMs: HOUR, maxWaitMs: 1_000 } });
    // The deadline is nearer than the window: the job is due at the deadline.
    const deadline = (await row(first.id))?.debounceUntil as Date;
    expect(first.runAt.getTime()).toBe(deadline.getTime());
    // Every later enqueue asks for now + 1 h, past the deadline: the payload is replaced, runAt stays at the deadline.
    const second = await jobs.enqueue('idle', 2, { debounce: { key: 'capped', windowMs: HOUR, maxWaitMs: HOUR } });
    expect(second).toMatchObject({ id: first.id, deduplicated: true, payload: 2 });
    expect(second.runAt.getTime()).toBe(deadline.getTime());
  });

  it('a key whose job started is free: the next enqueue stores a new job, the running one keeps its payload', async () => {
    const { jobs } = producers[0];
    handlers.gate = deferred();
    const running = await jobs.enqueue('reindex', 'hold', { debounce: { key: 'run', windowMs: 1 } });
    await waitFor(async () => (await jobs.findById(running.id))?.status === 'running', 'the job running');
    expect(await row(running.id)).not.toHaveProperty('debounceScope');
    const next = await jobs.enqueue('reindex', 'after', { debounce: { key: 'run', windowMs: HOUR } });
    expect(next).toMatchObject({ deduplicated: false, status: 'pending', payload: 'after' });
    expect(next.id).not.toBe(running.id);
    expect(await jobs.findById(running.id)).toMatchObject({ status: 'running', payload: 'hold' });
    handlers.gate.resolve();
    await waitFor(async () => (await jobs.findById(running.id))?.status === 'completed', 'the held job completed');
    await jobs.cancel(next.id);
  });

  it('runs once, with the last payload, after a burst of enqueues', async () => {
    const { jobs } = producers[0];
    await untilPreconditionReached('every enqueue of the burst found the job still pending', async () => {
      const key = `quiet-${new Types.ObjectId().toHexString()}`;
      const results = [];
      // A window long enough that the burst ends inside it unless the machine stalls for a second.
      for (let i = 1; i <= 5; i += 1)
        results.push(await jobs.enqueue('reindex', i, { debounce: { key, windowMs: 1_000 } }));
      const ids = new Set(results.map((job) => job.id));
      await waitFor(
        () => [...ids].every((id) => handlers.calls.some((call) => call.jobId === id)),
        'the debounced jobs run',
      );
      if (ids.size > 1) return notReached(`the job started inside the burst (${ids.size} jobs)`);
      const [id] = ids;
      expect(handlers.calls.filter((call) => call.jobId === id)).toEqual([{ jobId: id, payload: 5 }]);
      return reached();
    });
  });

  it('costs two commands for the enqueue that stores the job, one per replacement, three once maxWaitMs caps it', async () => {
    const { app, commands } = await monitoredApp(uniqueDatabaseName('debounce_cost'));
    try {
      const sent = () => commands.splice(0).filter((name) => name !== 'hello' && name !== 'ping');
      const debounce = { key: 'cost', windowMs: HOUR };
      sent();
      await app.jobs.enqueue('idle', 1, { debounce });
      expect(sent()).toEqual(['findAndModify', 'findAndModify']);
      await app.jobs.enqueue('idle', 2, { debounce });
      await app.jobs.enqueue('idle', 3, { debounce });
      expect(sent()).toEqual(['findAndModify', 'findAndModify']);
      // Past the deadline of maxWaitMs: the filtered replacement misses, the upsert reads the job, one replaces it.
      const capped = { key: 'capped-cost', windowMs: HOUR, maxWaitMs: 1_000 };
      await app.jobs.enqueue('idle', 1, { debounce: capped });
      sent();
      await app.jobs.enqueue('idle', 2, { debounce: capped });
      expect(sent()).toEqual(['findAndModify', 'findAndModify', 'findAndModify']);
    } finally {
      await app.close();
    }
  });

  it('a cancel frees the key', async () => {
    const { jobs } = producers[0];
    const job = await jobs.enqueue('idle', 1, { debounce: { key: 'cancel', windowMs: HOUR } });
    await jobs.cancel(job.id);
    const next = await jobs.enqueue('idle', 2, { debounce: { key: 'cancel', windowMs: HOUR } });
    expect(next).toMatchObject({ deduplicated: false, payload: 2 });
    expect(next.id).not.toBe(job.id);
  });

  it('frees a key an older version left on a row it claimed, and stores the new job', async () => {
    const { jobs } = producers[0];
    const scope = JSON.stringify(['idle', 'stale']);
    const { insertedId } = await connection.collection('jobs').insertOne({
      name: 'idle',
      payload: 'old',
      status: 'running',
      runAt: new Date(),
      lockedBy: 'old-version#1',
      lockedUntil: new Date(Date.now() + HOUR),
      debounceScope: scope,
      priority: 0,
      attemptCount: 0,
      maxAttempts: 3,
      attempts: [],
      fencingToken: 1,
      createdAt: new Date(),
      updatedAt: new Date(),
    });
    const job = await jobs.enqueue('idle', 'new', { debounce: { key: 'stale', windowMs: HOUR } });
    expect(job).toMatchObject({ deduplicated: false, payload: 'new' });
    expect(await connection.collection('jobs').findOne({ _id: insertedId })).not.toHaveProperty('debounceScope');
    expect(await connection.collection('jobs').findOne({ _id: insertedId })).toMatchObject({ status: 'running' });
  });

  it('enqueueMany: a key repeated in the batch keeps one job with the last payload, beside plain items', async () => {
    const { jobs } = producers[0];
    const debounce = { key: 'many', windowMs: HOUR };
    const results = await jobs.enqueueMany<unknown>([
      { name: 'idle', payload: 1, options: { debounce } },
      { name: 'idle', payload: 'plain' },
      { name: 'idle', payload: 3, options: { debounce } },
    ]);
    expect(results.map((job) => job.deduplicated)).toEqual([false, false, true]);
    expect(results[2]).toMatchObject({ id: results[0].id, payload: 3 });
    expect(await row(results[0].id)).toMatchObject({ payload: 3 });
    expect(results[1]).toMatchObject({ payload: 'plain' });
  });
});
