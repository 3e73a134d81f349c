import type { Model } from 'mongoose';
import { mongo } from 'mongoose';
import type { JobDocument } from '../model/job-document.js';
import { isRetryableReadError, mayHaveLanded, PartlyAppliedWriteError } from './database-errors.js';

/** One statement of an `update` command: a single-row update (`multi` false) with update operators. */
export interface UpdateStatement {
  q: mongo.Filter<JobDocument>;
  u: mongo.UpdateFilter<JobDocument>;
}

/** What an `update` command of single-row statements answered: rows matched, and the statements refused, by index. */
export interface UpdateAnswer {
  matched: number;
  refused: Map<number, mongo.MongoServerError>;
}

/** A `find` command's fields as `findFirstBatch` takes them (its collection and `singleBatch` are added). */
export interface FindFields {
  filter: mongo.Filter<JobDocument>;
  sort?: mongo.Document;
  projection?: mongo.Document;
  limit?: number;
  batchSize?: number;
}

/**
 * The bytes of statements one command carries at most: the server takes a command of 16 MiB plus 16 KiB; the rest is
 * left for the command's other fields and the array's keys (a few bytes a statement).
 */
export const MAX_STATEMENT_BYTES = 16 * 1024 * 1024 - 64 * 1024;

/** A statement's size in a command, as `sendUpdates` packs them. */
export function statementBytes(statement: UpdateStatement, options?: mongo.BSONSerializeOptions): number {
  return mongo.BSON.calculateObjectSize(statement, options);
}

/**
 * The commands of a batch claim and of a bulk of outcomes, sent as plain `update` and `find` commands (`Db.command`)
 * instead of through `bulkWrite` and a cursor: per row the driver's helpers (operation models, a size check and result
 * objects per op, a cursor per read) cost about a third of the whole protocol's client CPU (docs/benchmarks.md, "Plain
 * commands"). What the helpers did, done here:
 * - statements are packed under the size one command may have;
 * - the database's write concern is sent (raised to `w: 1` if it is `w: 0`: these writes must be answered), and a
 *   `writeConcernError` rejects as a `MongoServerError` carrying it, which `mayHaveLanded` reads as maybe applied;
 * - each statement's write error becomes the `MongoServerError` a lone write would have thrown (`refused`);
 * - an update without operators is refused before it is sent (it would replace the row);
 * - the client's BSON options (`promoteLongs`, `useBigInt64`, …) apply, as they do to the single claim's row;
 * - a read that failed with an error the driver retries reads after is sent once more.
 * What differs, on purpose:
 * - a multi-statement `update` is not a retryable write: the driver does not resend it (it resends a plain command
 *   only on an overload error, which the server answers before running anything). So a command of several statements
 *   that fails with a server error (`ok: 0`, e.g. a failover between two statements, which keeps those before) rejects
 *   as a `PartlyAppliedWriteError`, maybe applied: claims are read back by their lock ids, outcome writes sent again;
 * - reads go to the primary (a plain command's default) with no read concern (the server's `local`): the rows this
 *   worker just wrote, whatever the application's read preference or read concern.
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
   * the other; a failure stops there). Rejects as `sendUpdate` does, and with a `PartlyAppliedWriteError` when an
   * earlier command of this call had been answered.
   */
  async sendUpdates(
    statements: readonly UpdateStatement[],
    options?: mongo.BSONSerializeOptions,
  ): Promise<UpdateAnswer> {
    for (const { u } of statements) assertUpdateOperators(u);
    const answer: UpdateAnswer = { matched: 0, refused: new Map() };
    let answered = false;
    for (const [offset, pack] of packBySize(statements, options)) {
      try {
        const { matched, refused } = await this.sendOne(pack, options);
        answer.matched += matched;
        for (const [index, refusal] of refused) answer.refused.set(offset + index, refusal);
      } catch (error) {
        if (answered) throw new PartlyAppliedWriteError(error, 'A batched write failed after a first part was applied');
        throw error;
      }
      answered = true;
    }
    return answer;
  }

  /**
   * Sends single-row updates as exactly one unordered `update` command: the caller keeps them under
   * `MAX_STATEMENT_BYTES` (`statementBytes`). Rejects with the command's error when nothing of it can have been
   * applied (a network error, which `mayHaveLanded` reads as maybe applied, included), and with a
   * `PartlyAppliedWriteError` when a server error answered several statements (some may have been applied).
   */
  sendUpdate(statements: readonly UpdateStatement[], options?: mongo.BSONSerializeOptions): Promise<UpdateAnswer> {
    for (const { u } of statements) assertUpdateOperators(u);
    return this.sendOne(statements, options);
  }

  /** One command of statements already checked (`sendUpdate`'s rejections). */
  private async sendOne(
    statements: readonly UpdateStatement[],
    options: mongo.BSONSerializeOptions | undefined,
  ): Promise<UpdateAnswer> {
    try {
      return await this.sendUpdateCommand(statements, options);
    } catch (error) {
      // A write concern error says "maybe applied" already, and keeps its code's kind.
      if (statements.length > 1 && error instanceof mongo.MongoServerError && !mayHaveLanded(error)) {
        throw new PartlyAppliedWriteError(error, 'A batched write failed as a whole, maybe after some statements');
      }
      throw error;
    }
  }

  /**
   * The first batch of a `find` command with `singleBatch`: every row it asks for when they fit in one reply (16 MiB),
   * a prefix of them otherwise. Callers that cannot tell the two apart from the count use a cursor.
   */
  async findFirstBatch<T extends mongo.Document>(fields: FindFields): Promise<T[]> {
    const command = { find: this.collectionName, ...fields, singleBatch: true };
    let reply: mongo.Document;
    try {
      reply = await this.commandWithClientOptions(command);
    } catch (error) {
      if (!isRetryableReadError(error)) throw error;
      reply = await this.commandWithClientOptions(command);
    }
    const cursor = reply.cursor as { id?: unknown; firstBatch?: unknown } | undefined;
    if (!Array.isArray(cursor?.firstBatch)) {
      throw new mongo.MongoUnexpectedServerResponseError('A find reply without a first batch');
    }
    // A server that ignored `singleBatch` left a cursor open: closed here (best effort), its rows left unread.
    const open = openCursorId(cursor.id);
    if (open)
      await this.db()
        .command({ killCursors: this.collectionName, cursors: [open] })
        .catch(() => undefined);
    return cursor.firstBatch as T[];
  }

  private async sendUpdateCommand(
    statements: readonly UpdateStatement[],
    options: mongo.BSONSerializeOptions | undefined,
  ): Promise<UpdateAnswer> {
    const writeConcern = answeredWriteConcern(this.db().writeConcern);
    const reply = await this.commandWithClientOptions(
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
    const refused = new Map<number, mongo.MongoServerError>();
    const refusals = (reply.writeErrors ?? []) as {
      index: number;
      code?: number;
      errmsg?: string;
      errInfo?: mongo.Document;
    }[];
    for (const refusal of refusals) {
      refused.set(
        refusal.index,
        new mongo.MongoServerError({
          message: refusal.errmsg ?? 'write refused',
          code: refusal.code,
          errInfo: refusal.errInfo,
        }),
      );
    }
    return { matched: reply.n, refused };
  }

  /** `Db.command` with the client's BSON options, which it does not inherit (the driver's helpers do), then `options`. */
  private commandWithClientOptions(
    command: mongo.Document,
    options?: mongo.BSONSerializeOptions,
  ): Promise<mongo.Document> {
    const db = this.db();
    return db.command(command, options ? { ...db.bsonOptions, ...options } : db.bsonOptions);
  }
}

/** A cursor id that is not 0, as a `Long` (a reply's may come as a number, a `Long` or a bigint, per BSON options). */
function openCursorId(id: unknown): mongo.Long | undefined {
  let long: mongo.Long | undefined;
  if (typeof id === 'number') long = mongo.Long.fromNumber(id);
  else if (typeof id === 'bigint') long = mongo.Long.fromBigInt(id);
  else if (id instanceof mongo.Long) long = id;
  return long && !long.isZero() ? long : undefined;
}

/** Refuses an update without operators before it is sent: as a statement it would replace the whole row. */
function assertUpdateOperators(update: mongo.UpdateFilter<JobDocument>): void {
  const first = Object.keys(update)[0];
  if (first === undefined || !first.startsWith('$')) {
    throw new mongo.MongoInvalidArgumentError('A batched update must use update operators ($set, $inc, …)');
  }
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
    const size = statementBytes(statement, options);
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

/**
 * A write concern as a command's `writeConcern` field: undefined for none (the server's default); `w: 0` is raised to
 * `w: 1`, since what these commands took or finished is read from their answer.
 */
function answeredWriteConcern(concern: mongo.WriteConcern | undefined): mongo.Document | undefined {
  if (!concern) return undefined;
  const field: mongo.Document = {};
  if (concern.w !== undefined) field.w = concern.w === 0 ? 1 : concern.w;
  if (concern.journal !== undefined) field.j = concern.journal;
  if (concern.wtimeoutMS !== undefined) field.wtimeout = concern.wtimeoutMS;
  return Object.keys(field).length > 0 ? field : undefined;
}
