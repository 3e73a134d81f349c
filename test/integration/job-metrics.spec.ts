import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { Settings } from 'luxon';
import { Types } from 'mongoose';
import { InvalidOptionError, type JobMetricsOptions } from '../../lib';
import { createJobsTestApp, type JobsTestApp } from '../support/jobs-app';
import { uniqueDatabaseName } from '../support/test-database';

const NOW = Date.UTC(2030, 0, 1, 0, 1, 5);
const at = (offsetMs: number) => new Date(NOW + offsetMs);
const EMPTY_COUNTS = { pending: 0, running: 0, completed: 0, dead: 0, failed: 0, cancelled: 0 };

function row(name: string, status: string, fields: { runAt?: Date; finishedAt?: Date } = {}) {
  const createdAt = at(-120_000);
  return {
    _id: new Types.ObjectId(),
    name,
    payload: null,
    status,
    runAt: fields.runAt ?? createdAt,
    attemptCount: 0,
    maxAttempts: 3,
    attempts: [],
    fencingToken: 0,
    createdAt,
    updatedAt: createdAt,
    ...(fields.finishedAt && { finishedAt: fields.finishedAt }),
  };
}

describe('JobsService.metrics', () => {
  let app: JobsTestApp;
  const realNow = Settings.now;

  beforeAll(async () => {
    app = await createJobsTestApp({ dbName: uniqueDatabaseName('job-metrics'), options: { worker: false } });
    // The clock reads 00:01:05; a 60 s window in 10 s buckets spans the buckets starting 00:00:00 … 00:01:00.
    await app.connection.collection('jobs').insertMany([
      row('m.a', 'completed', { finishedAt: at(-62_000) }), // 00:00:03 → bucket 0
      row('m.a', 'completed', { finishedAt: at(-5_001) }), // 00:00:59.999 → bucket 5
      row('m.a', 'completed', { finishedAt: at(-3_000) }), // 00:01:02 → bucket 6
      row('m.a', 'completed', { finishedAt: at(-66_000) }), // 23:59:59 the day before: outside the window
      row('m.a', 'dead', { finishedAt: at(-50_000) }), // 00:00:15 → bucket 1
      row('m.a', 'failed', { finishedAt: at(-50_000) }),
      row('m.a', 'pending', { runAt: at(-30_000) }), // due for 30 s: the queue latency
      row('m.a', 'pending', { runAt: at(-5_000) }),
      row('m.a', 'pending', { runAt: at(60_000) }), // not due: not waiting
      row('m.a', 'running'),
      row('m.b', 'pending', { runAt: at(1_000) }),
      row('m.b', 'cancelled', { finishedAt: at(-1_000) }),
    ]);
  });
  afterEach(() => {
    Settings.now = realNow;
  });
  afterAll(async () => {
    await app?.close();
  });

  it('counts per status, oldest due pending age, and completed/dead/failed per bucket, per name', async () => {
    Settings.now = () => NOW;
    const metrics = await app.jobs.metrics({ windowMs: 60_000, bucketMs: 10_000 });
    const starts = [0, 1, 2, 3, 4, 5, 6].map((i) => new Date(Date.UTC(2030, 0, 1, 0, 0, i * 10)));
    const zero = (start: Date) => ({ start, completed: 0, dead: 0, failed: 0 });
    expect(metrics).toEqual({
      at: new Date(NOW),
      windowMs: 60_000,
      bucketMs: 10_000,
      names: [
        {
          name: 'm.a',
          counts: { ...EMPTY_COUNTS, pending: 3, running: 1, completed: 4, dead: 1, failed: 1 },
          oldestPendingAgeMs: 30_000,
          buckets: starts.map((start, i) => ({
            ...zero(start),
            completed: [0, 5, 6].includes(i) ? 1 : 0,
            dead: i === 1 ? 1 : 0,
            failed: i === 1 ? 1 : 0,
          })),
        },
        {
          name: 'm.b',
          counts: { ...EMPTY_COUNTS, pending: 1, cancelled: 1 },
          oldestPendingAgeMs: null,
          buckets: starts.map(zero),
        },
      ],
    });
  });

  it('an empty collection has no names', async () => {
    const empty = await createJobsTestApp({
      dbName: uniqueDatabaseName('job-metrics-empty'),
      options: { worker: false },
    });
    try {
      expect((await empty.jobs.metrics({ windowMs: 60_000, bucketMs: 60_000 })).names).toEqual([]);
    } finally {
      await empty.close();
    }
  });

  it.each<[string, unknown]>([
    ['no options', undefined],
    ['windowMs 0', { windowMs: 0, bucketMs: 1_000 }],
    ['bucketMs missing', { windowMs: 60_000 }],
    ['bucketMs 1.5', { windowMs: 60_000, bucketMs: 1.5 }],
    ['bucketMs as a string', { windowMs: 60_000, bucketMs: '1000' }],
    ['bucket wider than the window', { windowMs: 1_000, bucketMs: 2_000 }],
    ['more than 1,000 buckets', { windowMs: 1_001_000, bucketMs: 1_000 }],
    ['an unknown option', { windowMs: 60_000, bucketMs: 1_000, name: 'x' }],
  ])('%s → InvalidOptionError', async (_case, options) => {
    await expect(app.jobs.metrics(options as JobMetricsOptions)).rejects.toThrow(InvalidOptionError);
  });
});
