import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Types } from 'mongoose';
import { InvalidCursorError, InvalidOptionError, type JobRecord, type ListJobsOptions } from '../../lib';
import { createJobsTestApp, type JobsTestApp } from '../support/jobs-app';
import { uniqueDatabaseName } from '../support/test-database';

const PAGED = 500;
const rows = (app: JobsTestApp) => app.connection.collection<Record<string, unknown>>('jobs');

/** Every page of `list` until `nextCursor` is null, with `between` run after each page. */
async function allPages(
  app: JobsTestApp,
  options: Omit<ListJobsOptions, 'cursor'>,
  between: () => Promise<unknown> = async () => undefined,
): Promise<{ ids: string[]; pages: number }> {
  const ids: string[] = [];
  let cursor: string | undefined;
  let pages = 0;
  for (;;) {
    const page = await app.jobs.list({ ...options, cursor });
    pages += 1;
    ids.push(...page.jobs.map((job) => job.id));
    if (page.nextCursor === null) return { ids, pages };
    cursor = page.nextCursor;
    await between();
  }
}

/** A raw row like the ones the worker sets aside: a string `_id`, as a hand-written or foreign row may have. */
function foreignRow(id: unknown, name: string, createdAt: Date): Record<string, unknown> {
  return {
    _id: id,
    name,
    payload: null,
    status: 'failed',
    runAt: createdAt,
    attemptCount: 0,
    maxAttempts: 1,
    attempts: [],
    fencingToken: 0,
    lastError: 'its _id is not an ObjectId',
    createdAt,
    updatedAt: createdAt,
  };
}

describe('JobsService.list', () => {
  let app: JobsTestApp;
  let paged: string[];

  beforeAll(async () => {
    app = await createJobsTestApp({ dbName: uniqueDatabaseName('job-list'), options: { worker: false } });
    const items = Array.from({ length: PAGED }, (_, i) => ({
      name: 'paged',
      payload: { i },
      options: { strict: false },
    }));
    paged = (await app.jobs.enqueueMany(items)).map((job) => job.id);
  });
  afterAll(async () => {
    await app?.close();
  });

  it('pages through 500 jobs newest first (by _id), with no duplicate and no missing row', async () => {
    const { ids, pages } = await allPages(app, { name: 'paged', limit: 37 });
    expect(pages).toBe(Math.ceil(PAGED / 37));
    expect(new Set(ids).size).toBe(PAGED);
    expect(ids).toEqual([...paged].sort().reverse());
  });

  it('never repeats a row when jobs are inserted between pages', async () => {
    let added = 0;
    const { ids } = await allPages(app, { name: 'paged', limit: 50 }, async () => {
      added += 1;
      await app.jobs.enqueue('paged', { added }, { strict: false });
    });
    expect(added).toBeGreaterThan(5);
    expect(new Set(ids).size).toBe(ids.length);
    // Newest first from the first page's snapshot on: the inserted ones are newer, so none shows up.
    expect(ids).toEqual([...paged].sort().reverse());
    await rows(app).deleteMany({ 'payload.added': { $exists: true } });
  });

  it('returns a full page and a cursor, then the last page with a null cursor; 50 by default', async () => {
    const first = await app.jobs.list({ name: 'paged' });
    expect(first.jobs).toHaveLength(50);
    expect(first.jobs[0]).toMatchObject({
      id: paged[PAGED - 1],
      name: 'paged',
      status: 'pending',
      payload: { i: PAGED - 1 },
    });
    const exact = await app.jobs.list({ name: 'paged', limit: 200 });
    expect(exact.nextCursor).toEqual(expect.any(String));
    const none = await app.jobs.list({ name: 'no-such-name' });
    expect(none).toEqual({ jobs: [], nextCursor: null });
  });

  describe('filters', () => {
    let cancelled: JobRecord;
    let keyed: JobRecord;
    let other: JobRecord;
    beforeAll(async () => {
      cancelled = (await app.jobs.cancel((await app.jobs.enqueue('filter.a', 1, { strict: false })).id)) as JobRecord;
      keyed = await app.jobs.enqueue('filter.a', 2, { strict: false, dedupeKey: 'order-42' });
      other = await app.jobs.enqueue('filter.b', 3, { strict: false, dedupeKey: 'order-43' });
    });

    it('by status, one or several', async () => {
      const only = await app.jobs.list({ status: 'cancelled' });
      expect(only.jobs.map((job) => job.id)).toEqual([cancelled.id]);
      const both = await app.jobs.list({ status: ['cancelled', 'pending'], name: 'filter.a' });
      expect(both.jobs.map((job) => job.id)).toEqual([keyed.id, cancelled.id]);
    });

    it('by exact name', async () => {
      expect((await app.jobs.list({ name: 'filter.b' })).jobs.map((job) => job.id)).toEqual([other.id]);
      expect((await app.jobs.list({ name: 'filter' })).jobs).toEqual([]);
    });

    it('search: an id, or a dedupe key, exactly (never as a pattern)', async () => {
      expect((await app.jobs.list({ search: other.id })).jobs.map((job) => job.id)).toEqual([other.id]);
      expect((await app.jobs.list({ search: 'order-42' })).jobs.map((job) => job.id)).toEqual([keyed.id]);
      expect((await app.jobs.list({ search: 'order-4' })).jobs).toEqual([]);
      expect((await app.jobs.list({ search: 'order-.*' })).jobs).toEqual([]);
      expect((await app.jobs.list({ search: other.id.toUpperCase() })).jobs.map((job) => job.id)).toEqual([other.id]);
      expect((await app.jobs.list({ search: 'order-42', name: 'filter.b' })).jobs).toEqual([]);
    });

    it('from (inclusive) / to (exclusive) on createdAt', async () => {
      const at = (t: number) => new Date(Date.UTC(2001, 0, 1, 0, 0, t));
      await rows(app).insertMany(
        [10, 20, 30].map((t) => ({ ...foreignRow(new Types.ObjectId(), 'dated', at(t)), status: 'pending' })),
      );
      const created = async (options: ListJobsOptions) =>
        (await app.jobs.list({ name: 'dated', ...options })).jobs.map((job) => job.createdAt.getTime());
      expect(await created({ from: at(20) })).toEqual([at(30).getTime(), at(20).getTime()]);
      expect(await created({ to: at(20) })).toEqual([at(10).getTime()]);
      expect(await created({ from: at(10), to: at(30) })).toEqual([at(20).getTime(), at(10).getTime()]);
    });
  });

  it('lists and pages rows whose _id is not an ObjectId, in BSON order across types', async () => {
    const when = new Date();
    await rows(app).insertMany([
      foreignRow('legacy-b', 'mixed', when),
      foreignRow('legacy-a', 'mixed', when),
      foreignRow(7, 'mixed', when),
      foreignRow({ tenant: 'x', n: 1 }, 'mixed', when),
    ]);
    const real = await app.jobs.enqueueMany(
      [1, 2, 3].map((i) => ({ name: 'mixed', payload: i, options: { strict: false } })),
    );
    for (const limit of [1, 2, 3]) {
      const { ids } = await allPages(app, { name: 'mixed', limit });
      // Descending BSON order: ObjectIds, then objects, then strings, then numbers.
      expect(ids).toEqual([
        ...real.map((job) => job.id).reverse(),
        '{"tenant":"x","n":1}',
        'legacy-b',
        'legacy-a',
        '7',
      ]);
    }
    const found = await app.jobs.list({ search: 'legacy-a' });
    expect(found.jobs).toMatchObject([{ id: 'legacy-a', status: 'failed', name: 'mixed' }]);
  });

  describe('bad input', () => {
    it.each([0, 201, 1.5, '10', -1, Number.NaN, null])('limit %p → InvalidOptionError', async (limit) => {
      await expect(app.jobs.list({ limit } as unknown as ListJobsOptions)).rejects.toThrow(InvalidOptionError);
    });

    it.each([
      'not-a-cursor',
      '',
      Buffer.from('{"id":{"$where":"1"}}').toString('base64url'),
      Buffer.from('{"id":[1,2]}').toString('base64url'),
      // A plain object posing as a BSON value: the driver would refuse to serialize it (no typed error).
      Buffer.from('{"id":{"_bsontype":"ObjectId","$where":"1"}}').toString('base64url'),
      Buffer.from('{"id":{"_bsontype":"MinKey"}}').toString('base64url'),
      Buffer.from('{"id":{"a":[{"_bsontype":"ObjectId"}]}}').toString('base64url'),
      Buffer.from('"x"').toString('base64url'),
      'x'.repeat(5_000),
      42,
    ])('malformed cursor %p → InvalidCursorError', async (cursor) => {
      await expect(app.jobs.list({ cursor } as unknown as ListJobsOptions)).rejects.toThrow(InvalidCursorError);
    });

    it.each<[string, unknown]>([
      ['status', 'done'],
      ['status', ['pending', 'nope']],
      ['status', []],
      ['name', ''],
      ['name', { $ne: null }],
      ['search', { $ne: null }],
      ['search', ''],
      ['from', 'yesterday'],
      ['to', new Date(Number.NaN)],
      ['sort', 'asc'],
    ])('%s = %p → InvalidOptionError', async (option, value) => {
      await expect(app.jobs.list({ [option]: value } as ListJobsOptions)).rejects.toThrow(InvalidOptionError);
    });

    it('from after to → InvalidOptionError', async () => {
      await expect(app.jobs.list({ from: new Date(2), to: new Date(1) })).rejects.toThrow(InvalidOptionError);
    });
  });
});
