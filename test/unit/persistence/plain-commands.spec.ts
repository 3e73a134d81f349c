import { describe, expect, it } from '@jest/globals';
import { mongo, Types } from 'mongoose';
import { classifyWriteError, mayHaveLanded, WriteOutcomeUnknownError } from '../../../lib/persistence/database-errors';
import { PlainCommands, type UpdateStatement } from '../../../lib/persistence/plain-commands';

/**
 * The answers a wire server here cannot give (the Java test server confirms every write concern, and a failure between
 * two commands of one call needs a server that fails the second only): a database whose `command` answers from a
 * script. The happy paths and refusals run against the wire server (`test/integration/plain-commands.spec.ts`).
 */
function scriptedDb(answers: (() => Promise<mongo.Document>)[]): { db: mongo.Db; sent: mongo.Document[] } {
  const sent: mongo.Document[] = [];
  const db = {
    writeConcern: undefined,
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

  it('rejects with the driver error itself when the first command fails (nothing of the call was applied)', async () => {
    const refused = new mongo.MongoServerError({ message: 'not primary', code: 10107 });
    const { db } = scriptedDb([() => Promise.reject(refused)]);

    const error = await new PlainCommands(() => db, 'jobs').sendUpdates([statement()]).catch((e: unknown) => e);

    expect(error).toBe(refused);
    expect(mayHaveLanded(error)).toBe(false);
  });

  it('rejects as maybe landed when a later command of the call fails after an earlier one was applied', async () => {
    const refused = new mongo.MongoServerError({ message: 'not primary', code: 10107 });
    const { db, sent } = scriptedDb([async () => ({ ok: 1, n: 1 }), () => Promise.reject(refused)]);
    // Two statements of 9 MB: one command each.
    const nineMb = 9 * 1024 * 1024;

    const error = await new PlainCommands(() => db, 'jobs')
      .sendUpdates([statement(nineMb), statement(nineMb)])
      .catch((e: unknown) => e);

    expect(sent).toHaveLength(2);
    expect(error).toBeInstanceOf(WriteOutcomeUnknownError);
    expect((error as WriteOutcomeUnknownError).cause).toBe(refused);
    expect(mayHaveLanded(error)).toBe(true);
    expect(classifyWriteError(error)).toBe('transient');
  });

  it('rejects a reply without `n` as maybe landed: no count of rows taken or finished is ever guessed', async () => {
    const { db } = scriptedDb([async () => ({ ok: 1 })]);

    const error = await new PlainCommands(() => db, 'jobs').sendUpdates([statement()]).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(mongo.MongoUnexpectedServerResponseError);
    expect(mayHaveLanded(error)).toBe(true);
  });
});
