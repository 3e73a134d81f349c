import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import type { Document } from 'bson';
import { mongo, Types } from 'mongoose';
import { type JobExecutionContext, JobHandler } from '../../lib';
import { JobClaimService } from '../../lib/claim/job-claim.service';
import { mayHaveLanded } from '../../lib/persistence/database-errors';
import { PlainCommands } from '../../lib/persistence/plain-commands';
import { createJobsTestApp, type JobsTestApp } from '../support/jobs-app';
import { testMongoUri, uniqueDatabaseName } from '../support/test-database';

/**
 * The batch claim's and the outcome bulk's commands are plain `update` and `find` commands, not the driver's
 * `bulkWrite` and cursors (issue 30: the helpers cost as much again per row). What the helpers did is done here, and
 * attacked: statements over one command's 16 MiB, a statement the server refuses, the client's write concern, a read
 * whose rows do not fit in one reply.
 */

/** Seven megabytes: three of them do not fit in one command, nor in one reply. */
const SEVEN_MB = 7 * 1024 * 1024;

describe('plain update and find commands', () => {
  let client: mongo.MongoClient;
  let db: mongo.Db;
  const started: Document[] = [];
  const dbName = uniqueDatabaseName('plain_commands');

  beforeAll(async () => {
    // The driver copy mongoose uses, as the stores do: its errors are the classes `mayHaveLanded` knows.
    client = await mongo.MongoClient.connect(testMongoUri(), { monitorCommands: true });
    client.on('commandStarted', (event) => started.push({ name: event.commandName, ...event.command }));
    db = client.db(dbName);
  });
  afterEach(async () => {
    await db.collection('jobs').deleteMany({});
    started.length = 0;
  });
  afterAll(async () => {
    await db.dropDatabase();
    await client.close();
  });

  const commands = () => new PlainCommands(() => db, 'jobs');
  const updatesSent = () => started.filter((command) => command.name === 'update');

  it('sends single-row updates as one unordered update command and answers how many matched', async () => {
    const ids = [new Types.ObjectId(), new Types.ObjectId(), new Types.ObjectId()];
    await db.collection('jobs').insertMany(ids.map((_id) => ({ _id, owner: 'a' })));

    const answer = await commands().sendUpdates([
      { q: { _id: ids[0], owner: 'a' }, u: { $set: { done: true } } },
      { q: { _id: ids[1], owner: 'someone else' }, u: { $set: { done: true } } },
      { q: { _id: ids[2], owner: 'a' }, u: { $set: { done: true } } },
    ]);

    expect(answer).toEqual({ matched: 2, refused: new Map() });
    expect(updatesSent()).toHaveLength(1);
    expect(updatesSent()[0]).toMatchObject({ ordered: false });
    expect(updatesSent()[0]).not.toHaveProperty('writeConcern');
    const rows = await db
      .collection('jobs')
      .find({}, { sort: { _id: 1 } })
      .toArray();
    expect(rows.map((row) => row.done ?? false)).toEqual([true, false, true]);
  });

  it('answers a statement the server refused with the error a lone update throws, at its index, and applies the rest', async () => {
    const ids = [new Types.ObjectId(), new Types.ObjectId(), new Types.ObjectId()];
    await db.collection('jobs').insertMany(ids.map((_id, i) => ({ _id, n: i === 1 ? 'not a number' : i })));
    const lone = await db
      .collection('jobs')
      .updateOne({ _id: ids[1] }, { $inc: { n: 1 } })
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    expect(lone).toBeInstanceOf(mongo.MongoServerError);

    const answer = await commands().sendUpdates(ids.map((_id) => ({ q: { _id }, u: { $inc: { n: 10 } } })));

    expect(answer.matched).toBe(2);
    expect([...answer.refused.keys()]).toEqual([1]);
    const refusal = answer.refused.get(1);
    expect(refusal).toBeInstanceOf(mongo.MongoServerError);
    expect(refusal?.code).toBe((lone as mongo.MongoServerError).code);
    expect(mayHaveLanded(refusal)).toBe(false);
    const rows = await db
      .collection('jobs')
      .find({}, { sort: { _id: 1 } })
      .toArray();
    expect(rows.map((row) => row.n)).toEqual([10, 'not a number', 12]);
  });

  it('packs statements over 16 MiB into several commands, in order, counting refused indexes across them', async () => {
    const ids = Array.from({ length: 4 }, () => new Types.ObjectId());
    await db.collection('jobs').insertMany(ids.map((_id, i) => ({ _id, n: i === 3 ? 'text' : 0 })));
    const big = (fill: string) => fill.repeat(SEVEN_MB);

    const answer = await commands().sendUpdates([
      { q: { _id: ids[0] }, u: { $set: { blob: big('a') } } },
      { q: { _id: ids[1] }, u: { $set: { blob: big('b') } } },
      { q: { _id: ids[2] }, u: { $set: { blob: big('c') } } },
      { q: { _id: ids[3] }, u: { $inc: { n: 1 } } },
    ]);

    expect(answer.matched).toBe(3);
    expect([...answer.refused.keys()]).toEqual([3]);
    // 7 MB each: two fit under 16 MiB, the third and the small one go in a second command.
    expect(updatesSent().map((command) => (command.updates as Document[]).length)).toEqual([2, 2]);
    const rows = await db
      .collection('jobs')
      .aggregate([
        { $sort: { _id: 1 } },
        { $project: { first: { $substrCP: ['$blob', 0, 1] }, size: { $strLenCP: { $ifNull: ['$blob', ''] } } } },
      ])
      .toArray();
    expect(rows.map((row) => [row.first, row.size])).toEqual([
      ['a', SEVEN_MB],
      ['b', SEVEN_MB],
      ['c', SEVEN_MB],
      ['', 0],
    ]);
  });

  it("sends the client's write concern with each update command, as the driver's helpers apply it", async () => {
    const id = new Types.ObjectId();
    await db.collection('jobs').insertOne({ _id: id });
    const acknowledged = new mongo.MongoClient(testMongoUri(), { monitorCommands: true, w: 1, journal: true });
    const sent: Document[] = [];
    acknowledged.on('commandStarted', (event) => {
      if (event.commandName === 'update') sent.push(event.command);
    });
    try {
      await acknowledged.connect();
      const answer = await new PlainCommands(() => acknowledged.db(dbName), 'jobs').sendUpdates([
        { q: { _id: id }, u: { $set: { seen: true } } },
      ]);
      expect(answer.matched).toBe(1);
      expect(sent).toHaveLength(1);
      expect(sent[0].writeConcern).toEqual({ w: 1, j: true });
    } finally {
      await acknowledged.close();
    }
  });

  it("reads rows with the client's BSON options, as the driver's cursor does", async () => {
    const id = new Types.ObjectId();
    await db.collection('jobs').insertOne({ _id: id, count: mongo.Long.fromNumber(5), bytes: Buffer.from('hi') });
    const typed = await mongo.MongoClient.connect(testMongoUri(), { promoteLongs: false, promoteBuffers: true });
    try {
      const viaCursor = await typed.db(dbName).collection('jobs').find({ _id: id }).toArray();
      const [row] = await new PlainCommands(() => typed.db(dbName), 'jobs').findFirstBatch({ filter: { _id: id } });

      expect(viaCursor[0].count).toBeInstanceOf(mongo.Long);
      expect(row.count).toBeInstanceOf(mongo.Long);
      expect(Buffer.isBuffer(viaCursor[0].bytes)).toBe(true);
      expect(Buffer.isBuffer(row.bytes)).toBe(true);
    } finally {
      await typed.close();
    }
  });

  it('reads the first batch of a find in one command, sorted and projected', async () => {
    const rows = [3, 1, 2].map((rank) => ({ _id: new Types.ObjectId(), rank, big: 'x'.repeat(100) }));
    await db.collection('jobs').insertMany(rows);

    const found = await commands().findFirstBatch({ filter: {}, sort: { rank: 1 }, projection: { rank: 1 }, limit: 2 });

    expect(found.map((row) => row.rank)).toEqual([1, 2]);
    expect(found.every((row) => !('big' in row))).toBe(true);
    expect(started.filter((command) => command.name === 'find')).toHaveLength(1);
    expect(started.filter((command) => command.name === 'getMore' || command.name === 'killCursors')).toEqual([]);
  });
});

@Injectable()
class BigPayloads {
  @JobHandler('big')
  big(_payload: unknown, _ctx: JobExecutionContext) {}
}

describe('a batch claim of rows that do not fit in one reply', () => {
  let app: JobsTestApp | undefined;
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  it('takes three 7 MB rows in one batch and reads each back whole; a reply short of the count is read again by cursor', async () => {
    const started: Document[] = [];
    app = await createJobsTestApp({
      dbName: uniqueDatabaseName('plain_big_rows'),
      options: { worker: false, pollIntervalMs: 60_000 },
      providers: [BigPayloads],
      mongoose: {
        monitorCommands: true,
        connectionFactory: (connection: { getClient(): mongo.MongoClient }) => {
          connection
            .getClient()
            .on('commandStarted', (event) => started.push({ name: event.commandName, ...event.command }));
          return connection;
        },
      },
    });
    await app.jobs.enqueueMany(
      ['a', 'b', 'c'].map((fill, i) => ({ name: 'big', payload: { i, blob: fill.repeat(SEVEN_MB) } })),
    );
    started.length = 0;

    const taken = (await app.get(JobClaimService).claimBatch(['big'], 4, () => 4)) ?? [];

    // One batch of three (its take carries three statements), every payload whole. A real mongod answers the read
    // back in two replies (21 MB > 16 MiB): the plain read's first batch falls short of the three taken, and the
    // cursor reads them all; the Java test server answers in one.
    const takes = started.filter((command) => command.name === 'update');
    expect(takes.map((command) => (command.updates as Document[]).length)).toEqual([3]);
    const payloads = taken.map((claim) => claim.doc.payload as { i: number; blob: string });
    expect(payloads.map((payload) => [payload.i, payload.blob.length, payload.blob[0]])).toEqual([
      [0, SEVEN_MB, 'a'],
      [1, SEVEN_MB, 'b'],
      [2, SEVEN_MB, 'c'],
    ]);

    // A count the first batch does not reach (as a reply cut at 16 MiB would leave it): read again by cursor.
    const lockedUntil = taken[0].doc.lockedUntil as Date;
    const claims = taken.map((claim) => ({ id: claim.doc._id, lockId: claim.lockId }));
    started.length = 0;
    const again = await app.stores.claim.findClaimedByAny(claims, lockedUntil, 4);
    expect(again.map((row) => row.lockedBy)).toEqual(taken.map((claim) => claim.lockId));
    expect(started.filter((command) => command.name === 'find').map((command) => command.singleBatch ?? false)).toEqual(
      [true, false],
    );
  });
});
