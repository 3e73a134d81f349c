import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import type { Collection, Document, MongoClient } from 'mongodb';
import { mongo, Types } from 'mongoose';
import { RenewalBatcher } from '../../lib/lease/renewal-batcher';
import { now } from '../../lib/model/clock';
import { createIndexReady } from '../support/indexes';
import type { JobsTestApp } from '../support/jobs-app';
import { waitFor } from '../support/jobs-app';
import { droppingProxyPerTest, monitoredApp, settleAll } from '../support/monitored-app';
import { connectTestClient, uniqueDatabaseName } from '../support/test-database';

/** Long enough that no chunk is forwarded while a test runs. */
const BLACK_HOLE_MS = 10 * 60_000;

/** Running rows as a claim leaves them: owned by `lockId`, leased until `lockedUntil`. */
async function insertRunning(
  jobs: Collection<Document>,
  rows: { lockId: string; lockedUntil: Date; status?: string }[],
): Promise<Types.ObjectId[]> {
  const at = now();
  const docs = rows.map(({ lockId, lockedUntil, status }) => ({
    _id: new Types.ObjectId(),
    name: 'renewed',
    payload: {},
    status: status ?? 'running',
    runAt: at,
    priority: 0,
    attemptCount: 0,
    maxAttempts: 3,
    attempts: [],
    fencingToken: 1,
    lockedBy: lockId,
    lockedUntil,
    createdAt: at,
    updatedAt: at,
  }));
  await jobs.insertMany(docs);
  return docs.map((doc) => doc._id);
}

describe('batched lease renewals on a real wire server', () => {
  let client: MongoClient;
  let app: JobsTestApp;
  let commands: string[];
  let jobs: Collection<Document>;
  let batcher: RenewalBatcher;
  const dbName = uniqueDatabaseName('renewal_batching');

  beforeAll(async () => {
    client = await connectTestClient({ maxPoolSize: 2 });
    ({ app, commands } = await monitoredApp(dbName));
    jobs = client.db(dbName).collection('jobs');
    batcher = new RenewalBatcher(app.stores.lease, now);
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

  it('renews 50 leases in one update command, and finds the 5 lost ones with one read', async () => {
    const requested = new Date(now().getTime() + 30_000);
    const live = new Date(now().getTime() + 10_000);
    const ranOut = new Date(now().getTime() - 1_000);
    const plan = Array.from({ length: 50 }, (_, i) => {
      if (i === 7 || i === 21 || i === 40) return { lockId: `w#${i}`, row: { lockId: 'other#1', lockedUntil: live } };
      // Taken over, and that owner's lease ran out too (the lock is the fence, not the deadline).
      if (i === 12 || i === 33) return { lockId: `w#${i}`, row: { lockId: 'other#2', lockedUntil: ranOut } };
      return { lockId: `w#${i}`, row: { lockId: `w#${i}`, lockedUntil: live } };
    });
    const ids = await insertRunning(
      jobs,
      plan.map((p) => p.row),
    );
    commands.length = 0;

    const results = await settleAll(ids.map((id, i) => batcher.renew(id, plan[i].lockId, requested)));

    expect(commands).toEqual(['update', 'find']);
    const lost = results.flatMap((r, i) => (r.value === null ? [i] : []));
    expect(lost).toEqual([7, 12, 21, 33, 40]);
    for (const [i, r] of results.entries()) {
      if (!lost.includes(i)) expect(r).toEqual({ value: requested });
    }
    const rows = await jobs.find({}, { projection: { lockedBy: 1, lockedUntil: 1 } }).toArray();
    const deadline = new Map(rows.map((row) => [String(row._id), row.lockedUntil]));
    expect(ids.map((id, i) => (lost.includes(i) ? 'lost' : deadline.get(String(id))))).toEqual(
      ids.map((_, i) => (lost.includes(i) ? 'lost' : requested)),
    );
    // The lost rows are untouched: the other owners' deadlines, live or run out.
    expect([7, 21, 40].map((i) => deadline.get(String(ids[i])))).toEqual([live, live, live]);
    expect([12, 33].map((i) => deadline.get(String(ids[i])))).toEqual([ranOut, ranOut]);
  });

  it('sends no read when every lease matched, and never lowers a longer deadline', async () => {
    const requested = new Date(now().getTime() + 30_000);
    const longer = new Date(now().getTime() + 90_000);
    const ids = await insertRunning(jobs, [
      { lockId: 'w#1', lockedUntil: new Date(now().getTime() + 5_000) },
      { lockId: 'w#2', lockedUntil: longer },
    ]);
    commands.length = 0;

    const results = await settleAll([batcher.renew(ids[0], 'w#1', requested), batcher.renew(ids[1], 'w#2', requested)]);

    expect(commands).toEqual(['update']);
    // The lower bound: the Lease only moves its deadline forward to max(local, returned).
    expect(results).toEqual([{ value: requested }, { value: requested }]);
    expect((await jobs.findOne({ _id: ids[1] }))?.lockedUntil).toEqual(longer);
  });

  it("sends a lone renewal as today's single-row write, answering the row's exact deadline", async () => {
    const longer = new Date(now().getTime() + 90_000);
    const [id] = await insertRunning(jobs, [{ lockId: 'w#1', lockedUntil: longer }]);
    commands.length = 0;

    const value = await batcher.renew(id, 'w#1', new Date(now().getTime() + 30_000));

    expect(commands).toEqual(['findAndModify']);
    expect(value).toEqual(longer);
  });

  it('rejects only the renewal whose own write the server refused, and decides the others', async () => {
    // An application's unique index on the deadline: the one renewal asking for a held deadline is refused.
    await createIndexReady(jobs, { lockedUntil: 1 }, { unique: true, sparse: true, name: 'app_unique_deadline' });
    try {
      const base = now().getTime() + 30_000;
      const held = new Date(base + 2);
      const ids = await insertRunning(jobs, [
        ...[0, 1, 2, 3].map((i) => ({ lockId: `w#${i}`, lockedUntil: new Date(base - 10_000 + i) })),
        { lockId: 'other#1', lockedUntil: held, status: 'completed' },
      ]);
      commands.length = 0;

      const results = await settleAll([0, 1, 2, 3].map((i) => batcher.renew(ids[i], `w#${i}`, new Date(base + i))));

      expect(commands).toEqual(['update', 'find']);
      expect(results[2].error).toBeInstanceOf(mongo.MongoServerError);
      expect((results[2].error as mongo.MongoServerError).code).toBe(11000);
      expect([0, 1, 3].map((i) => results[i])).toEqual([0, 1, 3].map((i) => ({ value: new Date(base + i) })));
    } finally {
      await jobs.dropIndex('app_unique_deadline');
    }
  });
});

describe('batched lease renewals when the connection drops', () => {
  const dbName = uniqueDatabaseName('renewal_batching_drop');
  const fixture = droppingProxyPerTest(dbName);

  it('rejects every renewal of the command with the same error object', async () => {
    const { app, commands } = await monitoredApp(dbName, fixture.proxy().uri);
    try {
      const lockedUntil = new Date(now().getTime() + 10_000);
      const ids = await insertRunning(
        fixture.client().db(dbName).collection('jobs'),
        [0, 1, 2, 3, 4].map((i) => ({ lockId: `w#${i}`, lockedUntil })),
      );
      const batcher = new RenewalBatcher(app.stores.lease, now);
      commands.length = 0;
      fixture.proxy().setDelay(BLACK_HOLE_MS);
      const requested = new Date(now().getTime() + 30_000);
      const pending = settleAll(ids.map((id, i) => batcher.renew(id, `w#${i}`, requested)));
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
