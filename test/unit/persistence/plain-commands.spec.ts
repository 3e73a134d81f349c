import { describe, expect, it } from '@jest/globals';
import { mongo, Types } from 'mongoose';
import {
  classifyWriteError,
  mayHaveLanded,
  PartlyAppliedWriteError,
  type WriteErrorKind,
} from '../../../lib/persistence/database-errors';
import { JobClaimStore } from '../../../lib/persistence/job-claim.store';
import { OwnedUpdateBatcher } from '../../../lib/persistence/owned-update-batcher';
import { PlainCommands, type UpdateStatement } from '../../../lib/persistence/plain-commands';

/**
 * The answers a wire server here cannot give (the Java test server confirms every write concern, and a failure between
 * two commands of one call needs a server that fails the second only): a database whose `command` answers from a
 * script. The happy paths and refusals run against the wire server (`test/integration/plain-commands.spec.ts`).
 */
function scriptedDb(
  answers: (() => Promise<mongo.Document>)[],
  writeConcern?: mongo.WriteConcern,
): { db: mongo.Db; sent: mongo.Document[] } {
  const sent: mongo.Document[] = [];
  const db = {
    writeConcern,
    bsonOptions: {},
    command: (command: mongo.Document) => {
      sent.push(command);
      const next = answers.shift();
      if (!next) throw new Error('no answer scripted');
      return next();
    },
  } as unknown as mongo.Db;
  return { db, sent };
}

const statement = (blobBytes = 0): UpdateStatement => ({
  q: { _id: new Types.ObjectId() },
  u: { $set: { blob: 'x'.repeat(blobBytes) } },
});

describe('PlainCommands.sendUpdates, answers no test server gives', () => {
  it('rejects an update whose write concern could not be confirmed as maybe landed, keeping the code', async () => {
    const { db } = scriptedDb([
      async () => ({
        ok: 1,
        n: 2,
        nModified: 2,
        writeConcernError: { code: 64, errmsg: 'waiting for replication timed out' },
      }),
    ]);

    const error = await new PlainCommands(() => db, 'jobs').sendUpdates([statement(), statement()]).then(
      () => undefined,
      (e: unknown) => e,
    );

    expect(error).toBeInstanceOf(mongo.MongoServerError);
    expect((error as mongo.MongoServerError).code).toBe(64);
    expect((error as Error).message).toBe('waiting for replication timed out');
    expect(mayHaveLanded(error)).toBe(true);
    expect(classifyWriteError(error)).toBe('transient');
  });

  it('rejects with the driver error itself when a one-statement command fails (all or nothing)', async () => {
    const refused = new mongo.MongoServerError({ message: 'not primary', code: 10107 });
    const { db } = scriptedDb([() => Promise.reject(refused)]);

    const error = await new PlainCommands(() => db, 'jobs').sendUpdates([statement()]).catch((e: unknown) => e);

    expect(error).toBe(refused);
    expect(mayHaveLanded(error)).toBe(false);
  });

  it.each<[string, number, WriteErrorKind]>([
    ['11602 InterruptedDueToReplStateChange (a failover between two statements)', 11602, 'transient'],
    ['11601 Interrupted (a killed operation), unfamiliar to the classification', 11601, 'unknown'],
    ['2 BadValue, "about the document" for one row, here answering the whole command', 2, 'unknown'],
  ])('rejects a server error answering several statements as maybe applied: %s', async (_, code, kind) => {
    // mongod fails a multi-statement update as a whole on an interruption and keeps the statements before it.
    const cause = new mongo.MongoServerError({ message: `code ${code}`, code });
    const { db } = scriptedDb([() => Promise.reject(cause)]);

    const error = await new PlainCommands(() => db, 'jobs')
      .sendUpdates([statement(), statement(), statement()])
      .catch((e: unknown) => e);

    expect(error).toBeInstanceOf(PartlyAppliedWriteError);
    expect((error as PartlyAppliedWriteError).cause).toBe(cause);
    expect(mayHaveLanded(error)).toBe(true);
    expect(classifyWriteError(error)).toBe(kind);
  });

  it('keeps a network error of several statements as it is: maybe landed already, and transient', async () => {
    const cut = new mongo.MongoNetworkError('connection reset');
    const { db } = scriptedDb([() => Promise.reject(cut)]);

    const error = await new PlainCommands(() => db, 'jobs').sendUpdates([statement(), statement()]).catch((e) => e);

    expect(error).toBe(cut);
    expect(mayHaveLanded(error)).toBe(true);
  });

  it('rejects as maybe applied when a later command of the call fails after an earlier one was applied', async () => {
    const refused = new mongo.MongoServerError({ message: 'not primary', code: 10107 });
    const { db, sent } = scriptedDb([async () => ({ ok: 1, n: 1 }), () => Promise.reject(refused)]);
    // Two statements of 9 MB: one command each.
    const nineMb = 9 * 1024 * 1024;

    const error = await new PlainCommands(() => db, 'jobs')
      .sendUpdates([statement(nineMb), statement(nineMb)])
      .catch((e: unknown) => e);

    expect(sent).toHaveLength(2);
    expect(error).toBeInstanceOf(PartlyAppliedWriteError);
    expect((error as PartlyAppliedWriteError).cause).toBe(refused);
    expect(mayHaveLanded(error)).toBe(true);
    expect(classifyWriteError(error)).toBe('transient');
  });

  it('sends w: 1 where the client is unacknowledged (w: 0): what a batch took is read from its answer', async () => {
    const { db, sent } = scriptedDb([async () => ({ ok: 1, n: 1 })], new mongo.WriteConcern(0));

    await new PlainCommands(() => db, 'jobs').sendUpdates([statement()]);

    expect(sent[0].writeConcern).toEqual({ w: 1 });
  });

  it('refuses an update without operators before sending anything (it would replace the row)', async () => {
    const { db, sent } = scriptedDb([]);

    const error = await new PlainCommands(() => db, 'jobs')
      .sendUpdates([statement(), { q: { _id: new Types.ObjectId() }, u: { status: 'completed' } as never }])
      .catch((e: unknown) => e);

    expect(error).toBeInstanceOf(mongo.MongoInvalidArgumentError);
    expect(sent).toEqual([]);
  });

  it('rejects a reply without `n` as maybe landed: no count of rows taken or finished is ever guessed', async () => {
    const { db } = scriptedDb([async () => ({ ok: 1 })]);

    const error = await new PlainCommands(() => db, 'jobs').sendUpdates([statement()]).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(mongo.MongoUnexpectedServerResponseError);
    expect(mayHaveLanded(error)).toBe(true);
  });
});

describe('PlainCommands.findFirstBatch, answers no test server gives', () => {
  const rows = [{ _id: 1 }, { _id: 2 }];

  it('reads once more after an error the driver retries reads after, and only once', async () => {
    const cut = new mongo.MongoNetworkError('connection reset');
    const { db, sent } = scriptedDb([
      () => Promise.reject(cut),
      async () => ({ ok: 1, cursor: { id: 0, firstBatch: rows } }),
    ]);

    expect(await new PlainCommands(() => db, 'jobs').findFirstBatch({ filter: {} })).toEqual(rows);
    expect(sent.map((command) => command.find)).toEqual(['jobs', 'jobs']);

    const twice = scriptedDb([() => Promise.reject(cut), () => Promise.reject(cut)]);
    await expect(new PlainCommands(() => twice.db, 'jobs').findFirstBatch({ filter: {} })).rejects.toBe(cut);
    expect(twice.sent).toHaveLength(2);
  });

  it('does not read again after an error a retry would not fix', async () => {
    const refused = new mongo.MongoServerError({ message: 'unauthorized', code: 13 });
    const { db, sent } = scriptedDb([() => Promise.reject(refused)]);

    await expect(new PlainCommands(() => db, 'jobs').findFirstBatch({ filter: {} })).rejects.toBe(refused);
    expect(sent).toHaveLength(1);
  });

  it.each([
    ['a number', 42],
    ['a Long', mongo.Long.fromNumber(42)],
    ['a bigint', 42n],
  ])('closes a cursor a server left open despite singleBatch (its id as %s)', async (_, id) => {
    const { db, sent } = scriptedDb([
      async () => ({ ok: 1, cursor: { id, firstBatch: rows } }),
      async () => ({ ok: 1 }),
    ]);

    expect(await new PlainCommands(() => db, 'jobs').findFirstBatch({ filter: {} })).toEqual(rows);
    expect(sent[1]).toEqual({ killCursors: 'jobs', cursors: [mongo.Long.fromNumber(42)] });
  });

  it('kills nothing when the cursor is closed (id 0 in any of its forms)', async () => {
    const { db, sent } = scriptedDb([
      async () => ({ ok: 1, cursor: { id: 0, firstBatch: rows } }),
      async () => ({ ok: 1, cursor: { id: mongo.Long.ZERO, firstBatch: rows } }),
      async () => ({ ok: 1, cursor: { id: 0n, firstBatch: rows } }),
    ]);
    const commands = new PlainCommands(() => db, 'jobs');

    for (let i = 0; i < 3; i += 1) await commands.findFirstBatch({ filter: {} });

    expect(sent.map((command) => Object.keys(command)[0])).toEqual(['find', 'find', 'find']);
  });

  it('rejects a reply without a first batch as not understood', async () => {
    const { db } = scriptedDb([async () => ({ ok: 1 })]);

    await expect(new PlainCommands(() => db, 'jobs').findFirstBatch({ filter: {} })).rejects.toBeInstanceOf(
      mongo.MongoUnexpectedServerResponseError,
    );
  });
});

describe('JobClaimStore.takeEach, refusals a mongos gives', () => {
  /** The claim store on a scripted database: `model.db.db` is what `PlainCommands.of` reads. */
  function storeAnswering(reply: mongo.Document): JobClaimStore {
    const { db } = scriptedDb([async () => reply]);
    return new JobClaimStore({ db: { db }, collection: { collectionName: 'jobs' } } as never);
  }
  const rows = [0, 1, 2].map((i) => ({ id: new Types.ObjectId(), lockId: `w#${i}` }));
  const take = (store: JobClaimStore) =>
    store.takeEach(rows, new Date(), new Date(Date.now() + 30_000), { names: ['n'], skipIds: [] });

  it("rejects as maybe applied when a statement was refused for a reason not about its row (a shard's failover)", async () => {
    const store = storeAnswering({
      ok: 1,
      n: 1,
      writeErrors: [{ index: 1, code: 11602, errmsg: 'InterruptedDueToReplStateChange' }],
    });

    const error = await take(store).catch((e: unknown) => e);

    // The caller (ClaimsInDoubt.sendBatch) reads such a batch back by its lock ids instead of trusting the count.
    expect(error).toBeInstanceOf(PartlyAppliedWriteError);
    expect(mayHaveLanded(error)).toBe(true);
  });

  it.each([
    ['14 TypeMismatch', 14],
    ['11000 duplicate key (an index someone else created)', 11000],
  ])('answers a statement refused for its row (%s) as refused, the count as it is', async (_, code) => {
    const store = storeAnswering({ ok: 1, n: 2, writeErrors: [{ index: 2, code, errmsg: 'refused' }] });

    const answer = await take(store);

    expect(answer.matched).toBe(2);
    expect([...answer.refused.keys()]).toEqual([2]);
  });
});

describe('OwnedUpdateBatcher, refusals a mongos gives', () => {
  const refusal = (code: number) => new mongo.MongoServerError({ message: `code ${code}`, code });
  /** A batcher whose one command answers: the first statement matched, the second refused with `error`. */
  function batcherRefusingSecond(error: mongo.MongoServerError): OwnedUpdateBatcher {
    return new OwnedUpdateBatcher({} as never, {
      sendUpdate: async () => ({ matched: 1, refused: new Map([[1, error]]) }),
    });
  }
  const update = { $set: { status: 'completed' as const } };

  it('rejects a write refused for a reason not about its row as maybe applied (sent again, decided by finishedBy)', async () => {
    const batcher = batcherRefusingSecond(refusal(11602));

    const [first, second] = await Promise.allSettled([
      batcher.update(new Types.ObjectId(), 'w#0', update),
      batcher.update(new Types.ObjectId(), 'w#1', update),
    ]);

    expect(first).toEqual({ status: 'fulfilled', value: true });
    expect(second.status).toBe('rejected');
    const error = (second as PromiseRejectedResult).reason;
    expect(error).toBeInstanceOf(PartlyAppliedWriteError);
    expect(mayHaveLanded(error)).toBe(true);
    expect(classifyWriteError(error)).toBe('transient');
  });

  it('rejects a write refused for its document with that refusal itself, final as before', async () => {
    const typeMismatch = refusal(14);
    const batcher = batcherRefusingSecond(typeMismatch);

    const [, second] = await Promise.allSettled([
      batcher.update(new Types.ObjectId(), 'w#0', update),
      batcher.update(new Types.ObjectId(), 'w#1', update),
    ]);

    expect((second as PromiseRejectedResult).reason).toBe(typeMismatch);
    expect(classifyWriteError(typeMismatch)).toBe('permanent');
  });
});
