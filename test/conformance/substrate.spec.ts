import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Db, Document, MongoClient, UpdateFilter } from 'mongodb';
import { connectTestClient, uniqueDatabaseName } from '../support/test-database';

/**
 * The MongoDB subset the library relies on (docs/guarantees.md, "MongoDB features relied on"), checked on whatever server the harness
 * resolved. Every server (real mongod, memory server, Java fallback) must pass this first.
 */
describe(`MongoDB substrate conformance (${process.env.JOBS_TEST_MONGO_KIND})`, () => {
  const CLIENTS = 8;
  let clients: MongoClient[] = [];
  let dbs: Db[] = [];
  const dbName = uniqueDatabaseName('conformance');

  beforeAll(async () => {
    clients = await Promise.all(Array.from({ length: CLIENTS }, () => connectTestClient({ maxPoolSize: 4 })));
    dbs = clients.map((client) => client.db(dbName));
  });

  afterAll(async () => {
    await dbs[0]?.dropDatabase();
    await Promise.all(clients.map((client) => client.close()));
  });

  it('claims every document exactly once under 2,000 concurrent findOneAndUpdate calls from 8 connections', async () => {
    const docs = Array.from({ length: 1000 }, (_, i) => ({ seq: i, status: 'pending', priority: i % 3 }));
    await dbs[0].collection('claims').insertMany(docs);
    await dbs[0].collection('claims').createIndex({ status: 1, priority: -1, _id: 1 });

    const claimed: number[] = [];
    let empty = 0;
    await Promise.all(
      Array.from({ length: 2000 }, async (_, i) => {
        const db = dbs[i % CLIENTS];
        const owner = `owner-${i}`;
        const row = await db
          .collection('claims')
          .findOneAndUpdate(
            { status: 'pending' },
            { $set: { status: 'running', owner }, $inc: { claims: 1 } },
            { sort: { priority: -1, _id: 1 }, returnDocument: 'after' },
          );
        if (row) {
          expect(row.owner).toBe(owner);
          claimed.push(row.seq as number);
        } else {
          empty += 1;
        }
      }),
    );

    expect(claimed).toHaveLength(1000);
    expect(new Set(claimed).size).toBe(1000);
    expect(empty).toBe(1000);
    const overClaimed = await dbs[0].collection('claims').countDocuments({ claims: { $ne: 1 } });
    expect(overClaimed).toBe(0);
    const owners = await dbs[0].collection('claims').distinct('owner');
    expect(owners).toHaveLength(1000);
  });

  it('rejects a duplicate on a unique sparse index with code 11000 and allows documents without the key', async () => {
    const col = dbs[0].collection('dedupe');
    await col.createIndex({ key: 1 }, { unique: true, sparse: true });
    await col.insertOne({ key: 'a' });
    await col.insertMany([{ other: 1 }, { other: 2 }]);
    await expect(col.insertOne({ key: 'a' })).rejects.toMatchObject({ code: 11000 });
    expect(await col.countDocuments({})).toBe(3);
    // Unsetting the key frees it for a new document.
    await col.updateOne({ key: 'a' }, { $unset: { key: '' } });
    await col.insertOne({ key: 'a' });
    expect(await col.countDocuments({ key: 'a' })).toBe(1);
  });

  it('applies $inc, $push with $each/$slice, $unset, $max and $min like MongoDB', async () => {
    const col = dbs[0].collection('operators');
    const { insertedId } = await col.insertOne({ n: 1, until: new Date(1000), low: 5, gone: 'x', list: [1, 2] });
    const update: UpdateFilter<Document> = {
      $inc: { n: 2, fresh: 1 },
      $push: { list: { $each: [3, 4, 5], $slice: -3 } } as Document,
      $unset: { gone: '' },
      $max: { until: new Date(500) },
      $min: { low: 2 },
    };
    const after = await col.findOneAndUpdate({ _id: insertedId }, update, { returnDocument: 'after' });
    expect(after).toEqual({ _id: insertedId, n: 3, fresh: 1, until: new Date(1000), low: 2, list: [3, 4, 5] });
    const raised = await col.findOneAndUpdate(
      { _id: insertedId },
      { $max: { until: new Date(2000) } },
      { returnDocument: 'after' },
    );
    expect(raised?.until).toEqual(new Date(2000));
  });

  it('upserts with $setOnInsert only on insert', async () => {
    const col = dbs[0].collection('upserts');
    const update = { $setOnInsert: { createdBy: 'first' }, $inc: { hits: 1 } };
    const first = await col.findOneAndUpdate({ key: 'k' }, update, { upsert: true, returnDocument: 'after' });
    const second = await col.findOneAndUpdate(
      { key: 'k' },
      { $setOnInsert: { createdBy: 'second' }, $inc: { hits: 1 } },
      { upsert: true, returnDocument: 'after' },
    );
    expect(first).toMatchObject({ key: 'k', createdBy: 'first', hits: 1 });
    expect(second).toMatchObject({ key: 'k', createdBy: 'first', hits: 2 });
    expect(second?._id).toEqual(first?._id);
  });

  it('honours a sort that ends with _id as tie-breaker', async () => {
    const col = dbs[0].collection('sorting');
    const runAt = new Date(0);
    const inserted = await col.insertMany(
      Array.from({ length: 20 }, (_, i) => ({ priority: i % 2, runAt: i < 10 ? runAt : new Date(1), i })),
    );
    const ids = Object.values(inserted.insertedIds);
    const rows = await col.find({}).sort({ priority: -1, runAt: 1, _id: 1 }).toArray();
    const expected = ids
      .map((id, i) => ({ id, priority: i % 2, runAt: i < 10 ? 0 : 1 }))
      .sort(
        (a, b) => b.priority - a.priority || a.runAt - b.runAt || a.id.toHexString().localeCompare(b.id.toHexString()),
      )
      .map((row) => row.id.toHexString());
    expect(rows.map((row) => row._id.toHexString())).toEqual(expected);
  });

  it('matches every field of a query that names _id beside others (the owner fence), one row or $in', async () => {
    const col = dbs[0].collection('fenced');
    const inserted = await col.insertMany(
      Array.from({ length: 6 }, (_, i) => ({ status: i % 2 ? 'running' : 'pending', lockedBy: `lock-${i}` })),
    );
    const ids = Object.values(inserted.insertedIds);
    const fenced = (i: number, lockedBy: string, status = 'running') => ({ _id: ids[i], lockedBy, status });
    expect((await col.updateOne(fenced(1, 'lock-1'), { $set: { done: true } })).matchedCount).toBe(1);
    expect((await col.updateOne(fenced(1, 'lock-0'), { $set: { done: true } })).matchedCount).toBe(0);
    expect((await col.updateOne(fenced(0, 'lock-0'), { $set: { done: true } })).matchedCount).toBe(0);
    expect(await col.findOne(fenced(3, 'lock-3'))).toMatchObject({ _id: ids[3] });
    expect(await col.findOne(fenced(3, 'lock-3', 'pending'))).toBeNull();
    const taken = await col
      .find({ _id: { $in: ids.slice(1, 6) }, status: 'running', lockedBy: { $in: ['lock-1', 'lock-2', 'lock-5'] } })
      .sort({ _id: -1 })
      .toArray();
    expect(taken.map((row) => row._id)).toEqual([ids[5], ids[1]]);
    const twice = await col.find({ _id: { $in: [ids[1], ids[1]] }, status: 'running' }).toArray();
    expect(twice.map((row) => row._id)).toEqual([ids[1]]);
    const natural = await col
      .find({ _id: { $in: ids.slice(0, 3) }, lockedBy: { $exists: true } })
      .sort({ $natural: -1 })
      .toArray();
    expect(natural.map((row) => row._id)).toEqual([ids[2], ids[1], ids[0]]);
    const many = await col.updateMany({ _id: { $in: ids }, status: 'pending' }, { $set: { status: 'running' } });
    expect(many.matchedCount).toBe(3);
    expect(await col.countDocuments({ status: 'running' })).toBe(6);
    const named = dbs[0].collection<{ _id: string; x: number }>('named');
    await named.insertMany([
      { _id: 'abz', x: 1 },
      { _id: 'abc', x: 2 },
      { _id: 'xyz', x: 1 },
    ]);
    const byPattern = await named.find({ _id: { $in: [/^ab/] }, x: 1 }).toArray();
    expect(byPattern.map((row) => row._id)).toEqual(['abz']);
    expect((await named.updateOne({ _id: 'xyz', x: 1 }, { $set: { x: 3 } })).modifiedCount).toBe(1);
  });

  it('runs the simple aggregations the library uses ($match $group $sort $limit $count)', async () => {
    const col = dbs[0].collection('aggregations');
    await col.insertMany([{ s: 'a' }, { s: 'a' }, { s: 'b' }, { s: 'c' }]);
    const groups = await col
      .aggregate([
        { $match: { s: { $ne: 'c' } } },
        { $group: { _id: '$s', count: { $sum: 1 } } },
        { $sort: { _id: 1 } },
        { $limit: 5 },
      ])
      .toArray();
    expect(groups).toEqual([
      { _id: 'a', count: 2 },
      { _id: 'b', count: 1 },
    ]);
    const counted = await col.aggregate([{ $match: { s: 'a' } }, { $count: 'n' }]).toArray();
    expect(counted).toEqual([{ n: 2 }]);
  });
});
