import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { MongoClient } from 'mongodb';
import type { ClientSession } from 'mongoose';
import { type InvalidSessionError, type JobEvent, JobHandler } from '../../lib';
import { WorkArrived } from '../../lib/enqueue/work-arrived';
import { dedupeScope } from '../../lib/persistence/dedupe-scope';
import { createJobsTestApp, type JobsTestApp, waitFor } from '../support/jobs-app';
import { type RecordedCommand, SessionWireProxy } from '../support/session-wire-proxy';
import { testMongoUri, uniqueDatabaseName } from '../support/test-database';

@Injectable()
class OutboxHandlers {
  @JobHandler('outbox.mail')
  async mail() {}
}

/** The session id as the proxy records it. */
function hexOf(session: ClientSession): string {
  if (!session.id) throw new Error('a session without an id');
  return Buffer.from(session.id.id.buffer).toString('hex');
}

/**
 * The test server has no sessions nor transactions: a proxy advertises sessions, records the session fields of every
 * command and answers commit/abort itself. These tests prove the wiring (which session each command of an enqueue
 * travels in, and when events fire), not atomicity: the server keeps every write, committed or not. Atomicity is
 * transactional-enqueue.replset.spec.ts's, on a real replica set.
 */
describe('enqueue with { session } (wire-level, test server with advertised sessions)', () => {
  let proxy: SessionWireProxy;
  let app: JobsTestApp;
  let events: JobEvent[];
  let wakeUps: ReturnType<typeof jest.spyOn>;

  beforeAll(async () => {
    // A real server would act on the session fields: a standalone refuses them, a replica set opens a transaction the
    // proxy's own commit answer never commits. Recorded first, then stripped, so every assertion reads them still.
    proxy = await SessionWireProxy.start(testMongoUri(), { stripSessionFields: true });
    app = await createJobsTestApp({
      dbName: uniqueDatabaseName('txn_enqueue'),
      uri: proxy.uri,
      options: { worker: false },
      providers: [OutboxHandlers],
    });
    app.jobs.events$.subscribe((event) => events.push(event));
  });
  beforeEach(() => {
    events = [];
    wakeUps = jest.spyOn(app.get(WorkArrived), 'signal');
  });
  afterEach(() => wakeUps.mockRestore());
  afterAll(async () => {
    await app?.close();
    await proxy?.close();
  });

  /** The commands `run` sent, from its first to its last. */
  async function commandsOf<T>(run: () => Promise<T>): Promise<{ result: T; sent: RecordedCommand[] }> {
    const from = proxy.commands.length;
    const result = await run();
    return { result, sent: proxy.commands.slice(from) };
  }

  /** Every command on the jobs collection went in `session`'s transaction `txnNumber`; returns their names. */
  function expectAllInTransaction(sent: RecordedCommand[], lsid: string, txnNumber: number): string[] {
    const jobsCommands = sent.filter((command) => command.collection === 'jobs');
    expect(jobsCommands.length).toBeGreaterThan(0);
    for (const command of jobsCommands) {
      expect({
        name: command.name,
        lsid: command.lsid,
        txnNumber: command.txnNumber,
        autocommit: command.autocommit,
      }).toEqual({ name: command.name, lsid, txnNumber, autocommit: false });
    }
    expect(jobsCommands[0].startTransaction).toBe(true);
    expect(sent.filter((command) => command.name === 'commitTransaction').map((command) => command.lsid)).toEqual([
      lsid,
    ]);
    return jobsCommands.map((command) => command.name);
  }

  it('sends the insert of connection.transaction()’s enqueue in its session and transaction, nothing outside', async () => {
    let lsid = '';
    let txnNumber: number | undefined;
    const { result, sent } = await commandsOf(() =>
      app.connection.transaction(async (session) => {
        lsid = hexOf(session);
        const job = await app.jobs.enqueue('outbox.mail', { to: 'a' }, { session });
        txnNumber = proxy.commands.at(-1)?.txnNumber;
        return job;
      }),
    );
    expect(result.deduplicated).toBe(false);
    expect(txnNumber).toBeDefined();
    expect(expectAllInTransaction(sent, lsid, txnNumber as number)).toEqual(['insert']);
  });

  it('dedupes inside the transaction with one upsert per keyed job: a repeat and a held key return the holder', async () => {
    const held = await app.jobs.enqueue('outbox.mail', null, { dedupeKey: 'held' });
    let lsid = '';
    const { result, sent } = await commandsOf(() =>
      app.connection.transaction(async (session) => {
        lsid = hexOf(session);
        const first = await app.jobs.enqueue('outbox.mail', { n: 1 }, { session, dedupeKey: 'fresh' });
        const repeat = await app.jobs.enqueue('outbox.mail', { n: 2 }, { session, dedupeKey: 'fresh' });
        const holder = await app.jobs.enqueue('outbox.mail', { n: 3 }, { session, dedupeKey: 'held' });
        return { first, repeat, holder };
      }),
    );
    expect(result.first.deduplicated).toBe(false);
    expect(result.repeat).toMatchObject({ id: result.first.id, deduplicated: true, payload: { n: 1 } });
    expect(result.holder).toMatchObject({ id: held.id, deduplicated: true });
    const txnNumber = sent.find((command) => command.collection === 'jobs')?.txnNumber as number;
    expect(expectAllInTransaction(sent, lsid, txnNumber)).toEqual(['findAndModify', 'findAndModify', 'findAndModify']);
    expect(await app.connection.collection('jobs').countDocuments({ dedupeKey: 'fresh' })).toBe(1);
  });

  it('takes a key a finished row still carries (an older worker left it) inside the transaction, without a clash', async () => {
    const stale = await app.jobs.enqueue('outbox.mail', null, { dedupeKey: 'stale' });
    await app.connection
      .collection('jobs')
      .updateOne(
        { dedupeKey: 'stale' },
        { $set: { status: 'completed', dedupeScope: dedupeScope('outbox.mail', 'stale') } },
      );
    let lsid = '';
    const { result, sent } = await commandsOf(() =>
      app.connection.transaction(async (session) => {
        lsid = hexOf(session);
        return app.jobs.enqueue('outbox.mail', { fresh: true }, { session, dedupeKey: 'stale' });
      }),
    );
    expect(result).toMatchObject({ deduplicated: false, status: 'pending', payload: { fresh: true } });
    expect(result.id).not.toBe(stale.id);
    const txnNumber = sent.find((command) => command.collection === 'jobs')?.txnNumber as number;
    expect(expectAllInTransaction(sent, lsid, txnNumber)).toEqual(['findAndModify', 'update', 'findAndModify']);
  });

  it('sends enqueueMany’s writes in the transaction: keyless jobs in one insert, keyed ones upserted in order', async () => {
    let lsid = '';
    const { result, sent } = await commandsOf(() =>
      app.connection.transaction(async (session) => {
        lsid = hexOf(session);
        return app.jobs.enqueueMany(
          [
            { name: 'outbox.mail', payload: 1 },
            { name: 'outbox.mail', payload: 2, options: { dedupeKey: 'many' } },
            { name: 'outbox.mail', payload: 3 },
            { name: 'outbox.mail', payload: 4, options: { dedupeKey: 'many' } },
          ],
          { session },
        );
      }),
    );
    expect(result.map((job) => job.deduplicated)).toEqual([false, false, false, true]);
    expect(result[3].id).toBe(result[1].id);
    const txnNumber = sent.find((command) => command.collection === 'jobs')?.txnNumber as number;
    expect(expectAllInTransaction(sent, lsid, txnNumber)).toEqual(['insert', 'findAndModify', 'findAndModify']);
  });

  it('emits enqueued and wakes the poll loop only once connection.transaction() has committed', async () => {
    let inside: { events: number; wakeUps: number } | undefined;
    const job = await app.connection.transaction(async (session) => {
      const stored = await app.jobs.enqueue('outbox.mail', null, { session });
      inside = { events: events.length, wakeUps: wakeUps.mock.calls.length };
      return stored;
    });
    expect(inside).toEqual({ events: 0, wakeUps: 0 });
    expect(events).toMatchObject([{ type: 'enqueued', jobId: job.id }]);
    expect(wakeUps).toHaveBeenCalledTimes(1);
  });

  it('emits nothing for a job whose transaction aborted (the callback threw)', async () => {
    const { result, sent } = await commandsOf(() =>
      app.connection
        .transaction(async (session) => {
          await app.jobs.enqueueMany([{ name: 'outbox.mail' }, { name: 'outbox.mail' }], { session });
          throw new Error('rolled back by the caller');
        })
        .catch((error: unknown) => error),
    );
    expect(result).toMatchObject({ message: 'rolled back by the caller' });
    expect(sent.map((command) => command.name)).toContain('abortTransaction');
    expect(events).toEqual([]);
    expect(wakeUps).not.toHaveBeenCalled();
  });

  it('defers the events of a driver session’s withTransaction to its commit, and of a manual abort for good', async () => {
    const session = app.connection.getClient().startSession();
    try {
      let insideEvents = -1;
      await session.withTransaction(async () => {
        await app.jobs.enqueue('outbox.mail', null, { session });
        insideEvents = events.length;
      });
      expect(insideEvents).toBe(0);
      expect(events.map((event) => event.type)).toEqual(['enqueued']);

      session.startTransaction();
      await app.jobs.enqueue('outbox.mail', null, { session });
      await session.abortTransaction();
      expect(events.map((event) => event.type)).toEqual(['enqueued']);
      expect(wakeUps).toHaveBeenCalledTimes(1);
    } finally {
      await session.endSession();
    }
  });

  it('announces only the attempt that committed when withTransaction runs the callback again', async () => {
    proxy.failNextCommit(['TransientTransactionError']);
    const attempts: string[] = [];
    await app.connection.transaction(async (session) => {
      attempts.push((await app.jobs.enqueue('outbox.mail', null, { session })).id);
    });
    expect(attempts).toHaveLength(2);
    expect(events.map((event) => event.jobId)).toEqual([attempts[1]]);
    expect(wakeUps).toHaveBeenCalledTimes(1);
  });

  it('announces once a commit with an unknown result is retried to success', async () => {
    proxy.failNextCommit(['UnknownTransactionCommitResult']);
    const commits = () => proxy.commands.filter((command) => command.name === 'commitTransaction').length;
    const before = commits();
    const commitsWhenAnnounced: number[] = [];
    const subscription = app.jobs.events$.subscribe(() => commitsWhenAnnounced.push(commits() - before));
    try {
      const job = await app.connection.transaction((session) => app.jobs.enqueue('outbox.mail', null, { session }));
      expect(events.map((event) => event.jobId)).toEqual([job.id]);
      expect(commitsWhenAnnounced).toEqual([2]);
    } finally {
      subscription.unsubscribe();
    }
  });

  it('does not hold back the events of a job whose commit failed with an unknown result, on a session kept open', async () => {
    const session = app.connection.getClient().startSession();
    try {
      session.startTransaction();
      const job = await app.jobs.enqueue('outbox.mail', null, { session });
      proxy.failNextCommit(['UnknownTransactionCommitResult']);
      await expect(session.commitTransaction()).rejects.toMatchObject({ codeName: 'WriteConflict' });
      // The commit may have happened (here the test server kept the write): the job's own events must flow, even
      // while the caller keeps the session open without retrying, aborting or ending it.
      await app.jobs.cancel(job.id);
      await waitFor(() => events.some((event) => event.type === 'cancelled' && event.jobId === job.id), 'cancelled');
      expect(events.map((event) => event.type)).toEqual(['cancelled']);
    } finally {
      await session.endSession();
    }
  });

  it('with a session outside any transaction, writes in it and announces right after the write', async () => {
    const session = app.connection.getClient().startSession();
    try {
      const lsid = hexOf(session);
      const { result, sent } = await commandsOf(() =>
        app.jobs.enqueue('outbox.mail', null, { session, dedupeKey: 'plain' }),
      );
      expect(events).toMatchObject([{ type: 'enqueued', jobId: result.id }]);
      const jobsCommands = sent.filter((command) => command.collection === 'jobs');
      expect(jobsCommands.map(({ name, lsid, txnNumber }) => ({ name, lsid, txnNumber }))).toEqual([
        { name: 'insert', lsid, txnNumber: undefined },
      ]);
    } finally {
      await session.endSession();
    }
  });

  it('with a session outside any transaction, sends the dedupe read after a clash in it too', async () => {
    const held = await app.jobs.enqueue('outbox.mail', null, { dedupeKey: 'plain-held' });
    const session = app.connection.getClient().startSession();
    try {
      const lsid = hexOf(session);
      const { result, sent } = await commandsOf(() =>
        app.jobs.enqueue('outbox.mail', null, { session, dedupeKey: 'plain-held' }),
      );
      expect(result).toMatchObject({ id: held.id, deduplicated: true });
      const jobsCommands = sent.filter((command) => command.collection === 'jobs');
      expect(jobsCommands.map(({ name, lsid }) => ({ name, lsid }))).toEqual([
        { name: 'insert', lsid },
        { name: 'find', lsid },
      ]);
    } finally {
      await session.endSession();
    }
  });

  it('announces each committed transaction of a session reused for several, and only after its own commit', async () => {
    const session = app.connection.getClient().startSession();
    try {
      const ids: string[] = [];
      for (let round = 0; round < 2; round += 1) {
        session.startTransaction();
        ids.push((await app.jobs.enqueue('outbox.mail', { round }, { session })).id);
        expect(events.map((event) => event.jobId)).toEqual(ids.slice(0, round));
        await session.commitTransaction();
        await session.commitTransaction(); // a second commit of the same transaction is allowed: no second event
        expect(events.map((event) => event.jobId)).toEqual(ids);
      }
      expect(wakeUps).toHaveBeenCalledTimes(2);
    } finally {
      await session.endSession();
    }
  });

  describe('rejects a session it cannot use, before writing anything', () => {
    const rejected = async (session: unknown, reason: RegExp) => {
      const before = await app.connection.collection('jobs').countDocuments();
      const error = (await app.jobs
        .enqueue('outbox.mail', null, { session: session as ClientSession })
        .catch((caught: unknown) => caught)) as InvalidSessionError;
      expect(error).toMatchObject({ name: 'InvalidSessionError', reason: expect.stringMatching(reason) });
      const many = await app.jobs
        .enqueueMany([{ name: 'outbox.mail' }], { session: session as ClientSession })
        .catch((caught: unknown) => caught);
      expect(many).toMatchObject({ name: 'InvalidSessionError' });
      expect(await app.connection.collection('jobs').countDocuments()).toBe(before);
    };

    it('not a ClientSession', () => rejected({ id: 'fake' }, /not a MongoDB ClientSession/));

    it('a session of another MongoClient', async () => {
      const other = new MongoClient(proxy.uri);
      const session = other.startSession();
      try {
        await rejected(session, /another MongoClient/);
      } finally {
        await session.endSession();
        await other.close();
      }
    });

    it('an ended session', async () => {
      const session = app.connection.getClient().startSession();
      await session.endSession();
      await rejected(session, /ended/);
    });

    it('a session inside an enqueueMany item’s options (it belongs in the second argument)', async () => {
      const session = app.connection.getClient().startSession();
      try {
        const error = await app.jobs
          .enqueueMany([{ name: 'outbox.mail', options: { session } as never }])
          .catch((caught: unknown) => caught);
        expect(error).toMatchObject({ name: 'InvalidOptionError', option: 'session' });
      } finally {
        await session.endSession();
      }
    });
  });
});

/** The tests above trust SessionWireProxy's recording; check that it strips when asked, by recording behind it. */
describe('SessionWireProxy (test tooling)', () => {
  it('strips the session fields before the server when asked, and answers commit itself', async () => {
    const behind = await SessionWireProxy.start(testMongoUri());
    const stripping = await SessionWireProxy.start(behind.uri, { stripSessionFields: true });
    const client = await MongoClient.connect(stripping.uri);
    try {
      const collection = client.db(uniqueDatabaseName('wire_proxy')).collection('rows');
      await client.withSession((session) =>
        session.withTransaction(() => collection.insertOne({ a: 1 }, { session }).then(() => undefined)),
      );
      const sentBy = (proxy: SessionWireProxy) =>
        proxy.commands
          .filter((command) => command.collection === 'rows' || command.name === 'commitTransaction')
          .map(({ name, txnNumber, startTransaction }) => ({ name, txnNumber, startTransaction }));
      expect(sentBy(stripping)).toEqual([
        { name: 'insert', txnNumber: 1, startTransaction: true },
        { name: 'commitTransaction', txnNumber: 1, startTransaction: undefined },
      ]);
      expect(sentBy(behind)).toEqual([{ name: 'insert', txnNumber: undefined, startTransaction: undefined }]);
      expect(behind.commands.every((command) => command.lsid === undefined)).toBe(true);
      expect(await collection.countDocuments()).toBe(1);
    } finally {
      await client.close();
      await stripping.close();
      await behind.close();
    }
  });
});
