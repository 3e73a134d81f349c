import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import type { Collection, Document, MongoClient } from 'mongodb';
import { mongo, Types } from 'mongoose';
import { now } from '../../lib/model/clock';
import { mayHaveLanded, WriteOutcomeUnknownError } from '../../lib/persistence/database-errors';
import { OwnedUpdateBatcher } from '../../lib/persistence/owned-update-batcher';
import { PlainCommands } from '../../lib/persistence/plain-commands';
import { createIndexReady } from '../support/indexes';
import type { JobsTestApp } from '../support/jobs-app';
import { waitFor } from '../support/jobs-app';
import { droppingProxyPerTest, monitoredApp, settleAll } from '../support/monitored-app';
import { storedJobRow } from '../support/stored-job-row';
import { connectTestClient, uniqueDatabaseName } from '../support/test-database';

/** Long enough that no chunk is forwarded while a test runs. */
const BLACK_HOLE_MS = 10 * 60_000;

/** Running rows owned by `lockId` (or finished by it already, `finishedBy`). */
async function insertRows(
  jobs: Collection<Document>,
  rows: { lockId: string; status?: string; finishedBy?: string }[],
): Promise<Types.ObjectId[]> {
  const at = now();
  const docs = rows.map(({ lockId, status, finishedBy }) =>
    storedJobRow({
      _id: new Types.ObjectId(),
      name: 'finished',
      payload: {},
      status: status ?? 'running',
      fencingToken: 1,
      lockedBy: lockId,
      lockedUntil: new Date(at.getTime() + 30_000),
      finishedAt: undefined,
      ...(finishedBy ? { finishedBy } : {}),
    }),
  );
  await jobs.insertMany(docs);
  return docs.map((doc) => doc._id as Types.ObjectId);
}

describe('batched outcome writes on a real wire server', () => {
  let client: MongoClient;
  let app: JobsTestApp;
  let commands: string[];
  let jobs: Collection<Document>;
  const dbName = uniqueDatabaseName('outcome_batching');

  beforeAll(async () => {
    client = await connectTestClient({ maxPoolSize: 2 });
    ({ app, commands } = await monitoredApp(dbName));
    jobs = client.db(dbName).collection('jobs');
  });
  afterAll(async () => {
    await app.close();
    await client.db(dbName).dropDatabase();
    await client.close();
  });
  beforeEach(async () => {
    await jobs.deleteMany({});
    commands.length = 0;
  });

  it('completes 40 jobs settled in one turn with one update command, each row with its own result', async () => {
    const ids = await insertRows(
      jobs,
      Array.from({ length: 40 }, (_, i) => ({ lockId: `w#${i}` })),
    );
    commands.length = 0;
    const at = now();

    const results = await settleAll(
      ids.map((id, i) => app.stores.outcome.complete(id, `w#${i}`, at, { result: { n: i } })),
    );

    expect(commands).toEqual(['update']);
    expect(results).toEqual(ids.map(() => ({ value: true })));
    const rows = await jobs.find({}, { sort: { _id: 1 } }).toArray();
    expect(rows.map((row) => [row.status, row.result?.n, row.finishedBy, row.lockedBy])).toEqual(
      ids.map((_, i) => ['completed', i, `w#${i}`, undefined]),
    );
  });

  it('splits one turn of completions over 16 MiB into commands that each fit, every job answered and stored', async () => {
    const sevenMb = 7 * 1024 * 1024;
    const ids = await insertRows(
      jobs,
      [0, 1, 2, 3].map((i) => ({ lockId: `w#${i}` })),
    );
    commands.length = 0;
    const at = now();

    // Three results of 7 MB and a small one: 21 MB in one turn, more than one command may carry.
    const results = await settleAll(
      ids.map((id, i) =>
        app.stores.outcome.complete(id, `w#${i}`, at, { result: i < 3 ? 'abc'[i].repeat(sevenMb) : 'small' }),
      ),
    );

    expect(results).toEqual(ids.map(() => ({ value: true })));
    expect(commands).toEqual(['update', 'update']);
    const rows = await jobs
      .aggregate([{ $sort: { _id: 1 } }, { $project: { status: 1, size: { $strLenCP: '$result' } } }])
      .toArray();
    expect(rows.map((row) => [row.status, row.size])).toEqual([
      ['completed', sevenMb],
      ['completed', sevenMb],
      ['completed', sevenMb],
      ['completed', 5],
    ]);
  });

  it('answers false for rows another lock owns or a cancel ended, true for a row this lock finished already, with one read', async () => {
    const ids = await insertRows(jobs, [
      { lockId: 'w#0' },
      { lockId: 'other#1' }, // taken over
      { lockId: 'w#2' },
      // An earlier copy of this write landed (its answer was lost): the row is this lock's finished run.
      { lockId: 'w#3', status: 'completed', finishedBy: 'w#3' },
      { lockId: 'w#4', status: 'cancelled' }, // cancelled while running
      { lockId: 'w#5' },
    ]);
    commands.length = 0;
    const at = now();

    const results = await settleAll(ids.map((id, i) => app.stores.outcome.complete(id, `w#${i}`, at)));

    expect(commands).toEqual(['update', 'find']);
    expect(results.map((r) => r.value)).toEqual([true, false, true, true, false, true]);
    const rows = await jobs.find({}, { sort: { _id: 1 } }).toArray();
    expect(rows.map((row) => row.status)).toEqual([
      'completed',
      'running',
      'completed',
      'completed',
      'cancelled',
      'completed',
    ]);
  });

  it('rejects only the write the server refused for its document, with that refusal, and answers the others', async () => {
    // An application's unique index on results: the completion storing a held result is refused.
    await createIndexReady(jobs, { result: 1 }, { unique: true, sparse: true, name: 'app_unique_result' });
    try {
      const ids = await insertRows(jobs, [
        ...[0, 1, 2, 3].map((i) => ({ lockId: `w#${i}` })),
        { lockId: 'done#1', status: 'completed' },
      ]);
      await jobs.updateOne({ _id: ids[4] }, { $set: { result: 'held' } });
      commands.length = 0;
      const at = now();

      const results = await settleAll(
        [0, 1, 2, 3].map((i) => app.stores.outcome.complete(ids[i], `w#${i}`, at, { result: i === 2 ? 'held' : i })),
      );

      expect(commands).toEqual(['update']);
      expect(results[2].error).toBeInstanceOf(mongo.MongoServerError);
      expect((results[2].error as mongo.MongoServerError).code).toBe(11000);
      expect([0, 1, 3].map((i) => results[i])).toEqual([{ value: true }, { value: true }, { value: true }]);
      expect((await jobs.findOne({ _id: ids[2] }))?.status).toBe('running');
    } finally {
      await jobs.dropIndex('app_unique_result');
    }
  });

  it('answers every undecided write "maybe landed" when the read that decides them fails, never "not owned"', async () => {
    const ids = await insertRows(jobs, [{ lockId: 'w#0' }, { lockId: 'w#1', status: 'cancelled' }, { lockId: 'w#2' }]);
    // The bulk goes to the server; the read after it (one row did not match) fails, as in a failover.
    const failingReads = Object.assign(Object.create(jobs), {
      find: () => ({
        toArray: () => Promise.reject(new mongo.MongoServerSelectionError('no primary', {} as never)),
      }),
    }) as typeof jobs;
    const batcher = new OwnedUpdateBatcher(
      failingReads as never,
      new PlainCommands(() => client.db(dbName) as never, 'jobs'),
    );
    const at = now();

    const results = await settleAll(
      ids.map((id, i) =>
        batcher.update(id, `w#${i}`, { $set: { status: 'completed', finishedBy: `w#${i}`, updatedAt: at } }),
      ),
    );

    for (const result of results) expect(result.error).toBeInstanceOf(WriteOutcomeUnknownError);
    expect(mayHaveLanded(results[0].error)).toBe(true);
    // Two of them did land: a caller that sends them again finds them finished by its lock.
    const rows = await jobs.find({}, { sort: { _id: 1 } }).toArray();
    expect(rows.map((row) => row.finishedBy ?? null)).toEqual(['w#0', null, 'w#2']);
  });

  it('sends a lone write as a single updateOne, and a second write for the same job in the next command', async () => {
    const [a, b] = await insertRows(jobs, [{ lockId: 'w#a' }, { lockId: 'w#b' }]);
    commands.length = 0;
    const at = now();

    expect(await app.stores.outcome.complete(a, 'w#a', at)).toBe(true);
    expect(commands).toEqual(['update']);
    commands.length = 0;

    // Two writes for job b in one turn (the second matches nothing: the first finished the row).
    const failed = { at, error: 'boom', errorClass: 'Error' };
    const results = await settleAll([
      app.stores.outcome.complete(b, 'w#b', at),
      app.stores.outcome.recordFailure(b, 'w#b', failed, { status: 'pending', runAt: at }),
    ]);

    expect(commands).toEqual(['update', 'update']);
    expect(results).toEqual([{ value: true }, { value: false }]);
  });
});

describe('batched outcome writes when the connection drops', () => {
  const dbName = uniqueDatabaseName('outcome_batching_drop');
  const fixture = droppingProxyPerTest(dbName);

  it('rejects every write of the command with the same network error, as a lone write would', async () => {
    const { app, commands } = await monitoredApp(dbName, fixture.proxy().uri);
    try {
      const ids = await insertRows(
        fixture.client().db(dbName).collection('jobs'),
        [0, 1, 2, 3, 4].map((i) => ({ lockId: `w#${i}` })),
      );
      commands.length = 0;
      fixture.proxy().setDelay(BLACK_HOLE_MS);
      const at = now();
      const pending = settleAll(ids.map((id, i) => app.stores.outcome.complete(id, `w#${i}`, at)));
      await waitFor(() => commands.includes('update'), 'the batched update to be sent');
      await fixture.proxy().drop(0);

      const results = await pending;

      expect(commands).toEqual(['update']);
      const [first] = results;
      expect(first.error).toBeInstanceOf(mongo.MongoNetworkError);
      for (const r of results) expect(r.error).toBe(first.error);
    } finally {
      fixture.proxy().setDelay(0);
      await app.close();
    }
  });
});
