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
          paused: false,
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
          paused: false,
          buckets: starts.map(zero),
        },
      ],
      paused: [],
      // Both names together (m.b finished nothing in the series: cancelled is not charted).
      total: starts.map((start, i) => ({
        ...zero(start),
        completed: [0, 5, 6].includes(i) ? 1 : 0,
        dead: i === 1 ? 1 : 0,
        failed: i === 1 ? 1 : 0,
      })),
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

describe('JobsService.metrics with many job names', () => {
  let app: JobsTestApp;
  const realNow = Settings.now;
  const NAME_COUNT = 60;
  const tenant = (i: number) => `tenant.${String(i).padStart(3, '0')}.sync`;
  /** Tenant i has i % 7 failed and i % 5 dead rows: the 20 with the most failed + dead are the charted ones. */
  const failures = (i: number) => (i % 7) + (i % 5);

  beforeAll(async () => {
    app = await createJobsTestApp({ dbName: uniqueDatabaseName('job-metrics-names'), options: { worker: false } });
    const docs = [];
    for (let i = 0; i < NAME_COUNT; i += 1) {
      docs.push(row(tenant(i), 'completed', { finishedAt: at(-10_000) }));
      for (let f = 0; f < i % 7; f += 1) docs.push(row(tenant(i), 'failed', { finishedAt: at(-20_000) }));
      for (let d = 0; d < i % 5; d += 1) docs.push(row(tenant(i), 'dead', { finishedAt: at(-30_000) }));
    }
    // A rare name with one dead job long ago (outside any window): never charted by default, always counted.
    docs.push(row('rare.export', 'dead', { finishedAt: at(-86_400_000) }));
    await app.connection.collection('jobs').insertMany(docs);
  });
  afterEach(() => {
    Settings.now = realNow;
  });
  afterAll(async () => {
    await app?.close();
  });

  it('by default: counts for every name, buckets for the 20 with the most failed + dead rows, and a total', async () => {
    Settings.now = () => NOW;
    const metrics = await app.jobs.metrics({ windowMs: 60_000, bucketMs: 10_000 });
    expect(metrics.names).toHaveLength(NAME_COUNT + 1);
    expect(metrics.names.find((entry) => entry.name === 'rare.export')?.counts.dead).toBe(1);
    for (let i = 0; i < NAME_COUNT; i += 1) {
      const entry = metrics.names.find((candidate) => candidate.name === tenant(i));
      expect([entry?.counts.completed, entry?.counts.failed, entry?.counts.dead]).toEqual([1, i % 7, i % 5]);
    }
    const charted = metrics.names.filter((entry) => entry.buckets !== null);
    expect(charted).toHaveLength(20);
    const ranked = Array.from({ length: NAME_COUNT }, (_, i) => i).sort(
      (a, b) => failures(b) - failures(a) || (tenant(a) < tenant(b) ? -1 : 1),
    );
    const minimum = failures(ranked[19]);
    for (const entry of charted) {
      expect(entry.counts.failed + entry.counts.dead).toBeGreaterThanOrEqual(minimum);
    }
    // The total is every name's finished jobs per bucket, charted or not: 60 completed, and every failed and dead row.
    expect(metrics.total).toHaveLength(7);
    const sum = (status: 'completed' | 'failed' | 'dead') =>
      metrics.total.reduce((total, bucket) => total + bucket[status], 0);
    const all = Array.from({ length: NAME_COUNT }, (_, i) => i);
    expect([sum('completed'), sum('failed'), sum('dead')]).toEqual([
      NAME_COUNT,
      all.reduce((total, i) => total + (i % 7), 0),
      all.reduce((total, i) => total + (i % 5), 0),
    ]);
  });

  it('`names` selects whose buckets are returned; a name with no rows gets no entry', async () => {
    Settings.now = () => NOW;
    const metrics = await app.jobs.metrics({
      windowMs: 60_000,
      bucketMs: 10_000,
      names: [tenant(1), 'rare.export', 'no.such.name'],
    });
    expect(metrics.names).toHaveLength(NAME_COUNT + 1);
    const charted = metrics.names.filter((entry) => entry.buckets !== null);
    expect(charted.map((entry) => entry.name)).toEqual(['rare.export', tenant(1)]);
    const one = charted[1].buckets ?? [];
    expect(one.map((bucket) => [bucket.completed, bucket.failed, bucket.dead])).toEqual([
      [0, 0, 0],
      [0, 0, 0],
      [0, 0, 0],
      [0, 0, 1], // dead at 00:00:35
      [0, 1, 0], // failed at 00:00:45
      [1, 0, 0], // completed at 00:00:55
      [0, 0, 0],
    ]);
    expect(charted[0].buckets?.every((bucket) => bucket.dead === 0)).toBe(true);
    expect(
      (await app.jobs.metrics({ windowMs: 60_000, bucketMs: 10_000, names: [] })).names.every(
        (entry) => entry.buckets === null,
      ),
    ).toBe(true);
  });

  it('refuses a request whose buckets would exceed the budget, and bad names, with InvalidOptionError', async () => {
    const fifty = Array.from({ length: 50 }, (_, i) => tenant(i));
    // 50 names + the total, 1,001 buckets each: 51,051 buckets, over the 8,000 budget.
    const over = app.jobs.metrics({ windowMs: 1_000_000, bucketMs: 1_000, names: fifty });
    await expect(over).rejects.toThrow(InvalidOptionError);
    await expect(over).rejects.toThrow(/budget/);
    // At the edge: 6 names + the total = 7,007 buckets pass, 7 names + the total = 8,008 do not.
    const finest = { windowMs: 1_000_000, bucketMs: 1_000 };
    expect((await app.jobs.metrics({ ...finest, names: fifty.slice(0, 6) })).total).toHaveLength(1_001);
    await expect(app.jobs.metrics({ ...finest, names: fifty.slice(0, 7) })).rejects.toThrow(/budget/);
    // The default answer never refuses: it charts fewer names when the buckets are many.
    const byDefault = await app.jobs.metrics(finest);
    expect(byDefault.names.filter((entry) => entry.buckets !== null)).toHaveLength(6);
    const cases: unknown[] = [
      'tenant.001.sync',
      [''],
      [42],
      ['x'.repeat(201)],
      Array.from({ length: 51 }, (_, i) => tenant(i)),
    ];
    for (const names of cases) {
      await expect(
        app.jobs.metrics({ windowMs: 60_000, bucketMs: 10_000, names } as JobMetricsOptions),
      ).rejects.toThrow(
        expect.objectContaining({ name: 'InvalidOptionError', option: expect.stringMatching(/^names/) }),
      );
    }
  });
});
