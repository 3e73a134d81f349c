import type { Model } from 'mongoose';
import { mongo } from 'mongoose';
import type { JobDocument } from '../model/job-document.js';
import { WriteOutcomeUnknownError } from './database-errors.js';

/** One statement of an `update` command: a single-row update (`multi` false). */
export interface UpdateStatement {
  q: mongo.Filter<JobDocument>;
  u: mongo.UpdateFilter<JobDocument>;
}

/** What an `update` command of single-row statements answered: rows matched, and the statements refused, by index. */
export interface UpdateAnswer {
  matched: number;
  refused: Map<number, mongo.MongoServerError>;
}

/**
 * The bytes of statements one command carries at most: the server takes a command of 16 MiB plus 16 KiB; the rest is
 * left for the command's other fields and the array's keys (a few bytes a statement).
 */
const MAX_STATEMENT_BYTES = 16 * 1024 * 1024 - 64 * 1024;

/**
 * The commands of a batch claim and of a bulk of outcomes, sent as plain `update` and `find` commands (`Db.command`)
 * instead of through `bulkWrite` and a cursor. Per row the driver's helpers cost about as much as the rest of the
 * protocol (the floor measured 0.22 against 0.13 ms a job under load, docs/benchmarks.md): operation models, a
 * size check and result objects per op, a cursor and a session per read. What they did and these do themselves:
 * - split statements over the size a command may have (`sendUpdates` packs them by BSON size);
 * - apply the collection's write concern, and throw when the server could not confirm it (a `MongoServerError`
 *   carrying the `writeConcernError`, which `mayHaveLanded` reads as maybe applied, as it reads the driver's);
 * - turn each statement's write error into the `MongoServerError` a lone write would have thrown (`refused`);
 * - retry once after a retryable error: not done. Each caller already reads back or resends what may have landed
 *   (a claim in doubt is read back by its lock ids, an outcome write is sent again while its lease lives), and a plain
 *   command is never applied twice by a retry the caller does not see.
 * Reads go to the primary (a plain command's default), with no read concern (the server's default, `local`): the rows
 * this worker just wrote.
 */
export class PlainCommands {
  /**
   * @param db the native database, read at each command (mongoose sets its connection's once it is open)
   * @param collectionName the jobs collection
   */
  constructor(
    private readonly db: () => mongo.Db,
    private readonly collectionName: string,
  ) {}

  /** The commands on the jobs model's collection. */
  static of(model: Model<JobDocument>): PlainCommands {
    const connection = model.db;
    return new PlainCommands(() => {
      // Set once the connection is open (and its database name known); the stores' first commands, at bootstrap, wait
      // for that through mongoose, so a batch never gets here first. Should one, it fails as a client not connected.
      const db = connection.db as mongo.Db | undefined;
      if (!db) throw new mongo.MongoNotConnectedError('The jobs connection is not open yet');
      return db;
    }, model.collection.collectionName);
  }

  /**
   * Sends single-row updates as one unordered `update` command, or several when their size asks for it (one after
   * the other; a failure stops there). Rejects with the command's error: the driver's when it failed as a whole
   * before any was applied, a `WriteOutcomeUnknownError` when an earlier command of the same call had been applied.
   */
  async sendUpdates(
    statements: readonly UpdateStatement[],
    options?: mongo.BSONSerializeOptions,
  ): Promise<UpdateAnswer> {
    const answer: UpdateAnswer = { matched: 0, refused: new Map() };
    let applied = false;
    for (const [offset, pack] of packBySize(statements, options)) {
      try {
        await this.sendUpdateCommand(pack, offset, answer, options);
      } catch (error) {
        throw applied ? new WriteOutcomeUnknownError(error) : error;
      }
      applied = true;
    }
    return answer;
  }

  /**
   * The first batch of a `find` command with `singleBatch`: every row it asks for when they fit in one reply (16 MiB),
   * a prefix of them otherwise (the server closes the cursor either way). Callers that cannot tell the two apart
   * from the count use a cursor.
   */
  async findFirstBatch<T extends mongo.Document>(find: Omit<FindCommand, 'find'>): Promise<T[]> {
    const reply = await this.db().command({ find: this.collectionName, ...find, singleBatch: true });
    const rows = (reply.cursor as { firstBatch?: unknown } | undefined)?.firstBatch;
    if (!Array.isArray(rows)) throw new mongo.MongoUnexpectedServerResponseError('A find reply without a first batch');
    return rows as T[];
  }

  private async sendUpdateCommand(
    statements: readonly UpdateStatement[],
    offset: number,
    answer: UpdateAnswer,
    options: mongo.BSONSerializeOptions | undefined,
  ): Promise<void> {
    const db = this.db();
    // The driver's helpers apply the database's write concern (the client's, from its URI); a plain command is sent as is.
    const writeConcern = commandWriteConcern(db.writeConcern);
    const reply = await db.command(
      {
        update: this.collectionName,
        updates: statements,
        ordered: false,
        ...(writeConcern ? { writeConcern } : {}),
      },
      options,
    );
    const concern = reply.writeConcernError as { code?: number; errmsg?: string; errInfo?: mongo.Document } | undefined;
    if (concern) {
      // Applied, at least on the primary, but not confirmed: the whole command is in doubt.
      throw new mongo.MongoServerError({
        message: concern.errmsg ?? 'write concern error',
        code: concern.code,
        errInfo: concern.errInfo,
        writeConcernError: concern,
      });
    }
    // Without a count nothing tells which rows were taken or finished: a reply not understood, which may have landed.
    if (typeof reply.n !== 'number') throw new mongo.MongoUnexpectedServerResponseError('An update reply without `n`');
    answer.matched += reply.n;
    for (const refusal of (reply.writeErrors ?? []) as {
      index: number;
      code?: number;
      errmsg?: string;
      errInfo?: mongo.Document;
    }[]) {
      answer.refused.set(
        offset + refusal.index,
        new mongo.MongoServerError({
          message: refusal.errmsg ?? 'write refused',
          code: refusal.code,
          errInfo: refusal.errInfo,
        }),
      );
    }
  }
}

/** A `find` command's fields as `findFirstBatch` takes them. */
export interface FindCommand {
  find: string;
  filter: mongo.Filter<JobDocument>;
  sort?: mongo.Document;
  projection?: mongo.Document;
  limit?: number;
  batchSize?: number;
}

/** The statements in order, cut into runs under `MAX_STATEMENT_BYTES`, each with the index of its first statement. */
function packBySize(
  statements: readonly UpdateStatement[],
  options: mongo.BSONSerializeOptions | undefined,
): [number, UpdateStatement[]][] {
  const packs: [number, UpdateStatement[]][] = [];
  let pack: UpdateStatement[] = [];
  let bytes = 0;
  statements.forEach((statement, index) => {
    const size = mongo.BSON.calculateObjectSize(statement, options);
    if (pack.length > 0 && bytes + size > MAX_STATEMENT_BYTES) {
      packs.push([index - pack.length, pack]);
      pack = [];
      bytes = 0;
    }
    pack.push(statement);
    bytes += size;
  });
  if (pack.length > 0) packs.push([statements.length - pack.length, pack]);
  return packs;
}

/** A write concern as a command's `writeConcern` field; undefined for none (the server's default). */
function commandWriteConcern(concern: mongo.WriteConcern | undefined): mongo.Document | undefined {
  if (!concern) return undefined;
  const field: mongo.Document = {};
  if (concern.w !== undefined) field.w = concern.w;
  if (concern.journal !== undefined) field.j = concern.journal;
  if (concern.wtimeoutMS !== undefined) field.wtimeout = concern.wtimeoutMS;
  return Object.keys(field).length > 0 ? field : undefined;
}
