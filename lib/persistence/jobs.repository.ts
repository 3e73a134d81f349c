import { Inject, Injectable } from '@nestjs/common';
import { type Model, mongo, type Types } from 'mongoose';
import { RetryContendedError } from '../errors/retry-contended.error.js';
import { UniqueIndexRejectedJobError } from '../errors/unique-index-rejected-job.error.js';
import { DEDUPE_WRITE_TRIES, JOBS_MODEL, MAX_ATTEMPT_HISTORY } from '../jobs.constants.js';
import { idsBefore } from '../query/list-cursor.js';
import type { JobListQuery } from '../query/list-jobs-options.js';
import { CRON_TICK_KEEP_MS } from '../schedule/catch-up-window.js';
import type { NewJobDocument } from '../types/new-job-document.js';
import { addMs } from '../utils/clock.js';
import {
  type ByIdScope,
  byIdScopeFilter,
  CLAIM_SOURCES,
  type ClaimScope,
  type ClaimSource,
  dueFilter,
  escapeRegex,
  SLOT_HOLDER_FIELDS,
  type SlotClaim,
  type SlotField,
  type SlotHolder,
  scopeFilter,
  withSlots,
} from './claim-queries.js';
import { dedupeScope } from './dedupe-scope.js';
import { clashedIndex, clashOn, codeOf, duplicateKeyErrorsOnly, isDuplicateKey } from './duplicate-key.js';
import { DEDUPE_SCOPE_INDEX, type GuaranteeIndex, type IndexInfo, SCHEDULE_INDEX } from './guarantee-indexes.js';
import type { JobDocument } from './job.schema.js';
import {
  FINISHED_STATUSES,
  type FinishedStatus,
  type JobAttempt,
  type JobProgress,
  type JobStatus,
} from './job.types.js';

/** Fields that only mean something while a job is `running`: its lock and lease, and the fleet-limit slots it holds. */
const LOCK_FIELDS = { lockedBy: '', lockedUntil: '', leaseMs: '', concurrencySlot: '', groupSlot: '' } as const;
/**
 * Unset when a job finishes (completed, dead, failed): the lock, and the dedupe scope, so the same key can be enqueued
 * again. The user's `dedupeKey` stays on the row (display, and `retry` takes the scope back).
 */
const RELEASED_FIELDS = { ...LOCK_FIELDS, dedupeScope: '' } as const;
/**
 * Unset by cancel: like RELEASED_FIELDS but `lockedUntil` (raised by the cancel) and the slots stay: until that
 * deadline a cancelled run's handler may still run (`retry` makes the job due no earlier, and neither purge nor the
 * sweeper deletes the row), and it keeps counting against the limits.
 */
const CANCELLED_FIELDS = { lockedBy: '', dedupeScope: '', leaseMs: '' } as const;
const LIVE: JobStatus[] = ['pending', 'running'];
const REVIVABLE: JobStatus[] = ['dead', 'failed', 'cancelled'];
/** Payload keys whose value is `undefined` are left out, as JSON does, rather than stored as null. */
const INSERT_OPTIONS = { ignoreUndefined: true } as const;
/** The same for the user's values other writes carry (result, progress). */
const USER_VALUE_OPTIONS = { ignoreUndefined: true } as const;
const NAMESPACE_NOT_FOUND = 26;
const INDEX_NOT_FOUND = 27;

/**
 * What inserting one job did: stored it, or found its dedupe scope held (by a live job of its name, or by a finished
 * row an older version left it on), or found its tick's job stored already (another instance was first).
 */
export type InsertOutcome =
  | { kind: 'inserted'; doc: JobDocument }
  | { kind: 'dedupe-clash'; error: unknown }
  | { kind: 'tick-exists' };

/** What inserting one job of a bulk write did: as `InsertOutcome`, or rejected by another unique index. */
export type BulkInsertOutcome = InsertOutcome | { kind: 'rejected'; error: UniqueIndexRejectedJobError };

/** What `upsertByScope` did: stored the job, or found the live job of its name that holds its dedupe key. */
export type ScopedUpsertOutcome = { kind: 'inserted'; doc: JobDocument } | { kind: 'held'; holder: JobDocument };

/** One name and status of `countUnfinished`: how many rows, the smallest id, and how many leases have run out. */
export interface UnfinishedGroup {
  _id: { name: string; status: 'pending' | 'running' };
  count: number;
  firstId: unknown;
  expiredLeases: number;
}

/** What `retry` did: revived the row, found it in no revivable state, or found its key held by another live job. */
export type RetryResult =
  | { kind: 'revived'; job: JobDocument }
  | { kind: 'not-revivable' }
  | { kind: 'conflict'; job: JobDocument; holder: JobDocument };

/** Every query and update on the jobs collection. Services never build queries themselves. */
@Injectable()
export class JobsRepository {
  private readonly collection: mongo.Collection<JobDocument>;

  constructor(@Inject(JOBS_MODEL) private readonly model: Model<JobDocument>) {
    // Hot paths use the native collection: mongoose casting buys nothing for these fixed shapes.
    this.collection = model.collection as unknown as mongo.Collection<JobDocument>;
  }

  /** Creates every index the schema declares, each on its own; resolves the failed ones by index name. */
  async createDeclaredIndexes(): Promise<Map<string, unknown>> {
    const failed = new Map<string, unknown>();
    for (const [key, options] of this.model.schema.indexes()) {
      try {
        await this.collection.createIndex(key as mongo.IndexSpecification, options as mongo.CreateIndexesOptions);
      } catch (error) {
        failed.set(String(options.name), error);
      }
    }
    return failed;
  }

  async listIndexes(): Promise<IndexInfo[]> {
    try {
      return (await this.collection.listIndexes().toArray()) as IndexInfo[];
    } catch (error) {
      if (codeOf(error) === NAMESPACE_NOT_FOUND) return [];
      throw error;
    }
  }

  /**
   * Gives pending/running rows that an older version enqueued with a dedupeKey (and no scope) their scope, so their
   * keys keep deduplicating. Resolves how many rows got one, and how many could not because another live job of the
   * same name holds the key already (possible only for rows that older processes enqueued after the old index went).
   */
  async scopeLegacyKeys(): Promise<{ scoped: number; clashes: number }> {
    const rows = this.collection.find(
      { status: { $in: LIVE }, dedupeKey: { $exists: true }, dedupeScope: { $exists: false } },
      { projection: { name: 1, dedupeKey: 1 } },
    );
    const totals = { scoped: 0, clashes: 0 };
    let batch: mongo.AnyBulkWriteOperation<JobDocument>[] = [];
    const flush = async () => {
      if (batch.length === 0) return;
      const ops = batch;
      batch = [];
      try {
        totals.scoped += (await this.collection.bulkWrite(ops, { ordered: false })).modifiedCount;
      } catch (error) {
        const duplicates = duplicateKeyErrorsOnly(error);
        if (!duplicates) throw error;
        totals.scoped += duplicates.bulk.result.modifiedCount;
        totals.clashes += duplicates.writeErrors.length;
      }
    };
    for await (const row of rows) {
      const scope = dedupeScope(row.name, row.dedupeKey as string);
      batch.push({
        updateOne: {
          filter: { _id: row._id, status: { $in: LIVE }, dedupeScope: { $exists: false } },
          update: { $set: { dedupeScope: scope } },
        },
      });
      if (batch.length >= 1000) await flush();
    }
    await flush();
    return totals;
  }

  /** Resolves false when the index was gone already (another process dropped it first). */
  async dropIndex(name: string): Promise<boolean> {
    try {
      await this.collection.dropIndex(name);
      return true;
    } catch (error) {
      if (codeOf(error) === INDEX_NOT_FOUND) return false;
      throw error;
    }
  }

  /**
   * Inserts a copy of `doc` (the driver writes the generated _id into what it inserts). A duplicate key on the
   * job's own dedupe scope or tick key is an outcome, not an error.
   * @throws UniqueIndexRejectedJobError when another unique index (the application's) rejects it.
   */
  async insert(doc: NewJobDocument, session?: mongo.ClientSession): Promise<InsertOutcome> {
    const copy = { ...doc } as JobDocument;
    try {
      await this.collection.insertOne(copy, { ...INSERT_OPTIONS, session });
      return { kind: 'inserted', doc: copy };
    } catch (error) {
      if (!isDuplicateKey(error)) throw error;
      const outcome = await this.duplicateOutcome(error, doc, error, session);
      if (outcome.kind === 'rejected') throw outcome.error;
      return outcome;
    }
  }

  /**
   * Inserts copies of `docs` in one unordered bulk write (the others land when some clash), resolving each as
   * `insert` would, in input order. A job another unique index rejects is an outcome here (`rejected`), not a throw:
   * the caller must still learn which of the others were stored.
   */
  async insertMany(docs: NewJobDocument[], session?: mongo.ClientSession): Promise<BulkInsertOutcome[]> {
    const copies = docs.map((doc) => ({ ...doc }) as JobDocument);
    const outcomes: BulkInsertOutcome[] = copies.map((doc) => ({ kind: 'inserted', doc }));
    try {
      await this.collection.insertMany(copies, { ...INSERT_OPTIONS, ordered: false, session });
    } catch (error) {
      const duplicates = duplicateKeyErrorsOnly(error);
      if (!duplicates) throw error;
      for (const clash of duplicates.writeErrors) {
        outcomes[clash.index] = await this.duplicateOutcome(clash, docs[clash.index], error, session);
      }
    }
    return outcomes;
  }

  /** Whether `session` was started on the jobs connection's client (a session of another client cannot carry a write). */
  ownsSession(session: mongo.ClientSession): boolean {
    // `client` is on every driver session but not in the driver's public types.
    return (session as unknown as { client: unknown }).client === this.model.db.getClient();
  }

  findById(id: Types.ObjectId): Promise<JobDocument | null> {
    return this.collection.findOne({ _id: id });
  }

  /**
   * The row a claim for `lockId` took, if it landed and nothing changed the row since: a claim in doubt (its answer
   * was lost) read back. `lockedUntil` is the deadline that claim wrote, so the read is a point lookup on the reclaim
   * index (`status`, `lockedUntil`); nobody renews a lease its owner does not know it holds.
   */
  findClaimedBy(lockId: string, lockedUntil: Date): Promise<JobDocument | null> {
    return this.collection.findOne({ status: 'running', lockedUntil, lockedBy: lockId });
  }

  /**
   * Gives back, untouched, the row a claim in doubt took if it is still under that claim's lock (same filter as
   * `findClaimedBy`): pending again, no attempt counted. Safe after the lease ran out: a reclaim writes another lock id,
   * so at most one of the two matches. Whether a row was handed back.
   */
  async handBackClaimed(lockId: string, lockedUntil: Date, now: Date): Promise<boolean> {
    const result = await this.collection.updateOne(
      { status: 'running', lockedUntil, lockedBy: lockId },
      { $set: { status: 'pending', runAt: now, updatedAt: now, finishedBy: lockId }, $unset: LOCK_FIELDS },
    );
    return result.matchedCount === 1;
  }

  /**
   * A duplicate key on the job's dedupe scope or tick key; any other unique index rejected the job. When the error
   * does not say which index refused the job (servers other than MongoDB word it otherwise, or not at all), the rows
   * decide, never a guess: only a row that already carries the job's scope or tick key can clash on it.
   */
  private async duplicateOutcome(
    clash: unknown,
    doc: NewJobDocument,
    cause: unknown,
    session?: mongo.ClientSession,
  ): Promise<BulkInsertOutcome> {
    const { dedupeScope, scheduleKey } = doc;
    if (dedupeScope !== undefined && (await this.clashesOn(clash, DEDUPE_SCOPE_INDEX, { dedupeScope }, session)))
      return { kind: 'dedupe-clash', error: clash };
    if (scheduleKey !== undefined && (await this.clashesOn(clash, SCHEDULE_INDEX, { scheduleKey }, session)))
      return { kind: 'tick-exists' };
    return { kind: 'rejected', error: this.rejected(clash, doc, cause) };
  }

  /** Whether `clash` is on `index`: as the error says, else whether a row carries the value that index keeps unique. */
  private async clashesOn(
    clash: unknown,
    index: GuaranteeIndex,
    carrier: mongo.Filter<JobDocument>,
    session?: mongo.ClientSession,
  ): Promise<boolean> {
    const verdict = clashOn(clash, index);
    if (verdict !== 'unknown') return verdict === 'yes';
    // A transaction a duplicate key aborted can read nothing more: its caller retries or rethrows it whole.
    if (session?.inTransaction()) throw clash;
    return (await this.collection.findOne(carrier, { session, projection: { _id: 1 } })) !== null;
  }

  /** A duplicate key on an index that is not the dedupe scope's: named, so it cannot pass for a dedupe. */
  private rejected(clash: unknown, doc: Pick<NewJobDocument, 'name'>, cause: unknown): UniqueIndexRejectedJobError {
    const indexName = clashedIndex(clash).name ?? null;
    return new UniqueIndexRejectedJobError(this.collection.collectionName, indexName, doc.name, { cause });
  }

  /** The pending or running jobs holding these dedupe scopes (the unique index allows one per scope). */
  findLiveHolders(scopes: string[], session?: mongo.ClientSession): Promise<JobDocument[]> {
    return this.collection.find({ dedupeScope: { $in: scopes }, status: { $in: LIVE } }, { session }).toArray();
  }

  /**
   * Unsets a scope that a finished row still carries. Only a worker of an older version (which knew no scope)
   * finishes a job without freeing it; a live row never matches, so this cannot take a key from its holder.
   */
  async freeStaleScope(scope: string, session?: mongo.ClientSession): Promise<void> {
    await this.collection.updateMany(
      { dedupeScope: scope, status: { $nin: LIVE } },
      { $unset: { dedupeScope: '' } },
      { session },
    );
  }

  /**
   * Stores `doc` unless a live job holds its dedupe scope, without a duplicate-key error (one would abort `session`'s
   * transaction): an upsert keyed by the scope, `$setOnInsert` the job. A finished row still carrying the scope (an
   * older version's worker left it) has it unset in the same transaction, then the upsert runs once more: the unique
   * index allows one row per scope, so two upserts at most. Two transactions upserting one scope at once: the second
   * gets a write conflict (TransientTransactionError), and its `withTransaction` retry finds the first one's job.
   * @throws UniqueIndexRejectedJobError when another unique index (the application's) rejects it.
   */
  async upsertByScope(doc: NewJobDocument, session: mongo.ClientSession): Promise<ScopedUpsertOutcome> {
    const copy = { ...doc } as JobDocument;
    for (let tries = 0; tries < 2; tries += 1) {
      const row = await this.upsertScope(copy, session);
      if (row._id.equals(copy._id)) return { kind: 'inserted', doc: copy };
      if (LIVE.includes(row.status)) return { kind: 'held', holder: row };
      await this.collection.updateOne(
        { _id: row._id, dedupeScope: doc.dedupeScope, status: { $nin: LIVE } },
        { $unset: { dedupeScope: '' } },
        { session },
      );
    }
    throw new Error(`Dedupe scope ${doc.dedupeScope} was still held by a finished row after it was freed`);
  }

  private async upsertScope(copy: JobDocument, session: mongo.ClientSession): Promise<JobDocument> {
    try {
      const row = await this.collection.findOneAndUpdate(
        { dedupeScope: copy.dedupeScope },
        { $setOnInsert: copy },
        { ...INSERT_OPTIONS, session, upsert: true, returnDocument: 'after' },
      );
      return row as JobDocument;
    } catch (error) {
      // A clash on the scope (two upserts of it at once) is retried with the transaction; another index rejects the job.
      // An error naming no index (the transaction is aborted: nothing can be read) is rethrown as it came.
      if (!isDuplicateKey(error) || clashOn(error, DEDUPE_SCOPE_INDEX) !== 'no') throw error;
      throw this.rejected(error, copy, error);
    }
  }

  /**
   * One claim step: takes the first row of `source` in scope (`pending`: due, by priority desc, runAt asc, _id asc;
   * `running`: lease run out, oldest deadline first, counting the lost attempt) for `lockId` until `lockedUntil`.
   */
  take(
    source: ClaimSource,
    now: Date,
    lockId: string,
    lockedUntil: Date,
    scope: ClaimScope,
    slots?: SlotClaim,
  ): Promise<JobDocument | null> {
    const query = CLAIM_SOURCES[source];
    return this.collection.findOneAndUpdate(
      { ...query.filter(now), ...scopeFilter(scope) },
      withSlots(query.update(now, lockId, lockedUntil), slots),
      { sort: query.sort, returnDocument: 'after' },
    );
  }

  /** The row (id, name) `take` would take next, read without writing: finds a row the server refuses. */
  peek(source: ClaimSource, now: Date, scope: ClaimScope): Promise<Pick<JobDocument, '_id' | 'name'> | null> {
    const query = CLAIM_SOURCES[source];
    return this.collection.findOne<Pick<JobDocument, '_id' | 'name'>>(
      { ...query.filter(now), ...scopeFilter(scope) },
      { sort: query.sort, projection: { _id: 1, name: 1 } },
    );
  }

  /** `take` for exactly this row, if it is in `source` as `take` would find it and is in `scope`. */
  takeById(
    source: ClaimSource,
    id: Types.ObjectId,
    now: Date,
    lockId: string,
    lockedUntil: Date,
    scope: ByIdScope,
    slots?: SlotClaim,
  ): Promise<JobDocument | null> {
    const query = CLAIM_SOURCES[source];
    return this.collection.findOneAndUpdate(
      { _id: id, ...query.filter(now), ...byIdScopeFilter(scope) },
      withSlots(query.update(now, lockId, lockedUntil), slots),
      { returnDocument: 'after' },
    );
  }

  /**
   * The first row of `name` in `source` as `take` would find it, except rows of the `fullGroups` (a limited name's
   * claim learns the row's group before it picks the group slot to take with it).
   */
  peekOutsideGroups(
    source: ClaimSource,
    now: Date,
    name: string,
    fullGroups: readonly string[],
    scope: Pick<ClaimScope, 'skipIds' | 'skipLocks'>,
  ): Promise<Pick<JobDocument, '_id' | 'group'> | null> {
    const query = CLAIM_SOURCES[source];
    return this.collection.findOne<Pick<JobDocument, '_id' | 'group'>>(
      {
        ...query.filter(now),
        ...scopeFilter({ names: [name], ...scope }),
        ...(fullGroups.length > 0 ? { group: { $nin: [...fullGroups] } } : {}),
      },
      { sort: query.sort, projection: { _id: 1, group: 1 } },
    );
  }

  /**
   * The rows holding a slot of a name (keys starting with its `slotPrefix`) in the given fields. Each field's branch is
   * an anchored prefix, so a range scan of its unique index bounded by the slots held, whatever the limit.
   */
  findSlotHolders(prefix: string, fields: readonly SlotField[]): Promise<SlotHolder[]> {
    const pattern = `^${escapeRegex(prefix)}`;
    const branches = fields.map((field): mongo.Filter<JobDocument> => ({ [field]: { $regex: pattern } }));
    if (branches.length === 0) return Promise.resolve([]);
    return this.collection
      .find<SlotHolder>(branches.length === 1 ? branches[0] : { $or: branches }, { projection: SLOT_HOLDER_FIELDS })
      .toArray();
  }

  /**
   * Frees slots whose holder has left `running` and whose last lease has run out (a row cancelled while running
   * keeps its slots until its old `lockedUntil`). A running holder is never freed here: its lease is renewed, or it
   * is reclaimed with its slots when it runs out.
   */
  async freeEndedSlots(field: SlotField, keys: readonly string[], now: Date): Promise<void> {
    if (keys.length === 0) return;
    await this.collection.updateMany(
      { [field]: { $in: [...keys] }, status: { $ne: 'running' }, lockedUntil: { $not: { $gt: now } } },
      { $unset: { [field]: '' } },
    );
  }

  /**
   * Moves a row the server refuses to take from `source` to `failed`, with only `$set`/`$unset` of top-level fields:
   * the update that failed was an `$inc`/`$push` on a malformed field. False when the row no longer matches the
   * search that found it.
   */
  async setAside(
    id: Types.ObjectId,
    source: ClaimSource,
    reason: string,
    now: Date,
    expiresAt?: Date,
  ): Promise<boolean> {
    const result = await this.collection.updateOne(
      { _id: id, ...CLAIM_SOURCES[source].filter(now) },
      failedUpdate(reason, now, expiresAt),
    );
    return result.matchedCount === 1;
  }

  /**
   * Owner-fenced lease renewal: the deadline only ever moves forward; sets `progress` too when one is given, and
   * `leaseMs` (the lease the owner runs under) when given. Resolves the row's deadline after the write, or null when
   * this lock no longer owns the row.
   */
  async renewLease(
    id: Types.ObjectId,
    lockId: string,
    requestedUntil: Date,
    now: Date,
    progress?: JobProgress,
    leaseMs?: number,
  ): Promise<Date | null> {
    const { filter, update } = leaseRenewal({ id, lockId, requestedUntil, progress, leaseMs }, now);
    const row = await this.collection.findOneAndUpdate(filter, update, {
      ...USER_VALUE_OPTIONS,
      returnDocument: 'after',
      projection: { lockedUntil: 1 },
    });
    return row?.lockedUntil ?? null;
  }

  /**
   * Owner-fenced renewals of many leases in one unordered `bulkWrite`, each op exactly `renewLease`'s filter and update.
   * The server answers only how many rows matched in total; `refused` holds the ops (by index) whose own write the
   * server refused (e.g. a unique index), each as a `MongoServerError` like `renewLease` would have rejected with.
   * Rejects with the driver's original error when the command as a whole failed (network, timeout, write concern).
   */
  async renewLeases(renewals: readonly LeaseRenewal[], now: Date): Promise<LeaseRenewalsResult> {
    const ops = renewals.map(
      (renewal): mongo.AnyBulkWriteOperation<JobDocument> => ({ updateOne: leaseRenewal(renewal, now) }),
    );
    try {
      const result = await this.collection.bulkWrite(ops, { ...USER_VALUE_OPTIONS, ordered: false });
      return { matched: result.matchedCount, refused: new Map() };
    } catch (error) {
      const refused = refusedWrites(error);
      if (!refused) throw commandError(error);
      return { matched: (error as mongo.MongoBulkWriteError).result.matchedCount, refused };
    }
  }

  /**
   * Who holds these leases now, and which run last ended each row: the follow-up read when fewer renewals matched
   * than were sent.
   */
  readLeaseOwners(ids: readonly Types.ObjectId[]): Promise<LeaseOwner[]> {
    return this.collection.find<LeaseOwner>({ _id: { $in: [...ids] } }, { projection: LEASE_OWNER_FIELDS }).toArray();
  }

  /**
   * Whether the run of `lockId` ended this row: its finishing write landed (see `finishedBy`), whatever its answer
   * said. Read after a finishing write whose answer was lost, before it counts as not this worker's any more.
   */
  async finishedBy(id: Types.ObjectId, lockId: string): Promise<boolean> {
    return (await this.collection.countDocuments({ _id: id, finishedBy: lockId }, { limit: 1 })) === 1;
  }

  /** Moves a lease this lock holds back to `until` (a renewal that landed after its watchdog ended the lease). */
  async relinquishLease(id: Types.ObjectId, lockId: string, until: Date): Promise<void> {
    await this.collection.updateOne(owned(id, lockId), { $min: { lockedUntil: until } });
  }

  /**
   * Marks the job completed with the handler's result (none when `undefined`) and the progress this attempt set last
   * (none when it set none), in the one owner-fenced write: nothing is written unless all of it is. `expiresAt` (here
   * and in every write that finishes a job): its retention's stamp, none when it is kept.
   */
  complete(
    id: Types.ObjectId,
    lockId: string,
    now: Date,
    { result, progress, expiresAt }: { result?: unknown; progress?: JobProgress; expiresAt?: Date } = {},
  ): Promise<boolean> {
    return this.updateOwned(
      id,
      lockId,
      {
        $set: {
          status: 'completed',
          finishedBy: lockId,
          finishedAt: now,
          updatedAt: now,
          ...(result === undefined ? {} : { result }),
          ...(progress === undefined ? {} : { progress }),
          ...expiry(expiresAt),
        },
        // No progress from this attempt: an earlier attempt's value must not pass for this one's.
        $unset: { ...RELEASED_FIELDS, lastError: '', ...(progress === undefined ? { progress: '' } : {}) },
      },
      USER_VALUE_OPTIONS,
    );
  }

  /** Records a failed attempt, then either schedules the retry or dead-letters the job. */
  recordFailure(
    id: Types.ObjectId,
    lockId: string,
    attempt: JobAttempt,
    next: { status: 'pending'; runAt: Date } | { status: 'dead'; expiresAt?: Date },
  ): Promise<boolean> {
    const history = { attempts: { $each: [attempt], $slice: -MAX_ATTEMPT_HISTORY } };
    const common = { lastError: attempt.error, updatedAt: attempt.at, finishedBy: lockId };
    return this.updateOwned(
      id,
      lockId,
      next.status === 'pending'
        ? {
            $set: { ...common, status: 'pending', runAt: next.runAt },
            $unset: LOCK_FIELDS,
            $inc: { attemptCount: 1 },
            $push: history,
          }
        : {
            $set: { ...common, status: 'dead', finishedAt: attempt.at, ...expiry(next.expiresAt) },
            $unset: RELEASED_FIELDS,
            $inc: { attemptCount: 1 },
            $push: history,
          },
    );
  }

  /** Dead-letters a job this lock owns without recording another attempt (the reclaim already did). */
  deadLetter(id: Types.ObjectId, lockId: string, now: Date, expiresAt?: Date): Promise<boolean> {
    return this.updateOwned(id, lockId, {
      $set: { status: 'dead', finishedBy: lockId, finishedAt: now, updatedAt: now, ...expiry(expiresAt) },
      $unset: RELEASED_FIELDS,
    });
  }

  /**
   * Dead-letters a job whose outcome write the server refused for good: only small, fixed fields are written
   * (no attempt pushed, no counter incremented), so the refused part cannot be refused again.
   */
  deadLetterUnstorable(
    id: Types.ObjectId,
    lockId: string,
    reason: string,
    now: Date,
    expiresAt?: Date,
  ): Promise<boolean> {
    return this.updateOwned(id, lockId, {
      $set: {
        status: 'dead',
        finishedBy: lockId,
        lastError: reason,
        finishedAt: now,
        updatedAt: now,
        ...expiry(expiresAt),
      },
      $unset: RELEASED_FIELDS,
    });
  }

  /** Gives a job back untouched (shutdown): pending again, no attempt counted. */
  release(id: Types.ObjectId, lockId: string, now: Date): Promise<boolean> {
    return this.updateOwned(id, lockId, {
      $set: { status: 'pending', runAt: now, updatedAt: now, finishedBy: lockId },
      $unset: LOCK_FIELDS,
    });
  }

  /** Moves a job this lock owns to `failed`: it cannot run as stored (the claim gave back a row no handler accepts). */
  markFailed(id: Types.ObjectId, lockId: string, reason: string, now: Date, expiresAt?: Date): Promise<boolean> {
    const update = failedUpdate(reason, now, expiresAt);
    return this.updateOwned(id, lockId, { ...update, $set: { ...update.$set, finishedBy: lockId } });
  }

  /**
   * pending/running → cancelled, freeing the dedupe scope. Resolves the row after the change, or null when it was in
   * no cancellable state. A running row's `lockedUntil` is raised by the lease its claim recorded (`leaseMs`;
   * `fallbackLeaseMs` for a row an older version claimed): its owner learns of the cancel by that deadline at the
   * latest (its next renewal, or its watchdog) and then has up to one lease to settle, so until the raised deadline
   * the cancelled handler may still run. `retry`, slot release, purge and the sweeper wait for it, and `expiresAt`
   * is stamped no earlier.
   */
  async cancel(
    id: Types.ObjectId,
    now: Date,
    { expiresAt, fallbackLeaseMs }: { expiresAt?: Date; fallbackLeaseMs: number },
  ): Promise<JobDocument | null> {
    const read = await this.collection.findOne<CancelSubject>({ _id: id }, { projection: CANCEL_SUBJECT });
    if (!read || !LIVE.includes(read.status)) return null;
    const raised = settleDeadline(read, fallbackLeaseMs);
    const lockedUntil = raised ?? read.lockedUntil;
    const stamp = expiresAt && latest(expiresAt, lockedUntil);
    const before = await this.collection.findOneAndUpdate(
      { _id: id, status: { $in: LIVE } },
      {
        $set: { status: 'cancelled', finishedAt: now, updatedAt: now, ...expiry(stamp) },
        $unset: CANCELLED_FIELDS,
        ...(raised && { $max: { lockedUntil: raised } }),
      },
      { returnDocument: 'before' },
    );
    if (!before) return null;
    const written = latest(before.lockedUntil, raised);
    const settled = settleDeadline(before, fallbackLeaseMs);
    if (settled && written && settled > written) {
      // A renewal (or a claim) landed between the read and the write: the owner holds a later deadline than the one
      // raised. Renewals cannot land any more, so the deadline the write found is final: raise from it.
      await this.raiseCancelledDeadline(id, written, settled, stamp !== undefined);
    }
    const { lockedBy: _lock, dedupeScope: _scope, leaseMs: _lease, ...kept } = before;
    const finalDeadline = latest(written, settled);
    return {
      ...kept,
      status: 'cancelled',
      finishedAt: now,
      updatedAt: now,
      ...(finalDeadline && { lockedUntil: finalDeadline }),
      ...expiry(stamp && latest(stamp, finalDeadline)),
    };
  }

  /**
   * Raises a cancelled row's deadline from `written` to `settled` (and its expiry with it). A `retry` that came in
   * between made the job due at `written`: its `runAt` moves to `settled` too.
   */
  private async raiseCancelledDeadline(
    id: Types.ObjectId,
    written: Date,
    settled: Date,
    stamped: boolean,
  ): Promise<void> {
    const raised = await this.collection.updateOne(
      { _id: id, status: 'cancelled', lockedUntil: written },
      { $max: { lockedUntil: settled, ...(stamped && { expiresAt: settled }) } },
    );
    if (raised.matchedCount === 1) return;
    await this.collection.updateOne(
      { _id: id, status: 'pending', lockedUntil: written },
      { $max: { lockedUntil: settled, runAt: settled } },
    );
  }

  /**
   * dead/failed/cancelled → pending, attempts reset (history kept), in one write that also takes the job's dedupe
   * scope back; when another live job of the name holds it, nothing changes (`conflict`). Due now, or at the
   * deadline a cancelled run's owner still holds.
   */
  async retry(id: Types.ObjectId, now: Date): Promise<RetryResult> {
    for (let tries = 0; tries < DEDUPE_WRITE_TRIES; tries += 1) {
      const row = await this.findById(id);
      if (!row || !REVIVABLE.includes(row.status)) return { kind: 'not-revivable' };
      const scope = row.dedupeKey === undefined ? undefined : dedupeScope(row.name, row.dedupeKey);
      const deadlineAhead = row.lockedUntil !== undefined && row.lockedUntil > now;
      const runAt = deadlineAhead && row.lockedUntil ? row.lockedUntil : now;
      try {
        const revived = await this.collection.findOneAndUpdate(
          // Only the row as read where runAt depends on it: its state and the deadline runAt was computed from (the
          // scope depends on name and key, which never change). Other writes to the row do not force another try.
          {
            _id: id,
            status: row.status,
            lockedUntil: row.lockedUntil === undefined ? { $exists: false } : row.lockedUntil,
          },
          {
            $set: { status: 'pending', runAt, attemptCount: 0, updatedAt: now, ...(scope && { dedupeScope: scope }) },
            // A pending job never carries an expiry: the sweeper must not delete it. While a cancelled run's deadline
            // is ahead, its lock deadline and slots stay: that run may still be going (`freeEndedSlots`).
            $unset: { ...(deadlineAhead ? { lockedBy: '' } : LOCK_FIELDS), finishedAt: '', expiresAt: '' },
          },
          { returnDocument: 'after' },
        );
        if (revived) return { kind: 'revived', job: revived };
      } catch (error) {
        if (!isDuplicateKey(error)) throw error;
        const onScope =
          scope !== undefined &&
          (await this.clashesOn(error, DEDUPE_SCOPE_INDEX, { dedupeScope: scope, _id: { $ne: id } }));
        if (!onScope) throw this.rejected(error, row, error);
        const [holder] = await this.findLiveHolders([scope]);
        if (holder) return { kind: 'conflict', job: row, holder };
        await this.freeStaleScope(scope);
      }
    }
    throw new RetryContendedError(id.toHexString(), DEDUPE_WRITE_TRIES);
  }

  /** What `cancel` needs to know of a row before its write: its name and tick (for the expiry to stamp). */
  findCancelSubject(id: Types.ObjectId): Promise<Pick<JobDocument, '_id' | 'name' | 'scheduleKey' | 'runAt'> | null> {
    return this.collection.findOne<Pick<JobDocument, '_id' | 'name' | 'scheduleKey' | 'runAt'>>(
      { _id: id },
      { projection: { name: 1, scheduleKey: 1, runAt: 1 } },
    );
  }

  /**
   * Deletes up to `limit` finished rows whose expiry has passed, oldest expiry first (read by the `retention` index),
   * never a cron tick's row within `CRON_TICK_KEEP_MS` of its tick, nor a cancelled run's row before its
   * `lockedUntil` (its handler may still run, and the row holds its fleet-limit slots). The delete repeats the read's filter, so a row
   * retried in between stays; several processes deleting at once only find fewer rows. `found` < `limit`: no more.
   */
  async deleteExpired(now: Date, limit: number): Promise<DeleteBatch> {
    return this.deleteBatch(
      { expiresAt: { $lte: now }, status: { $in: [...FINISHED_STATUSES] }, ...ticksPastKeep(now), ...settledBy(now) },
      { expiresAt: 1 },
      limit,
    );
  }

  /** `deleteExpired` for `purge`: up to `limit` rows of one finished status (and name, finished before a date). */
  async deleteFinished(filter: PurgeFilter, now: Date, limit: number): Promise<DeleteBatch> {
    return this.deleteBatch(
      {
        status: filter.status,
        ...(filter.name !== undefined && { name: filter.name }),
        ...(filter.finishedBefore !== undefined && { finishedAt: { $lt: filter.finishedBefore } }),
        ...ticksPastKeep(now),
        ...settledBy(now),
      },
      // No sort: one on _id could walk the _id index over the whole collection instead of the status prefix.
      undefined,
      limit,
    );
  }

  /** Reads ids then deletes by them: a bounded delete (deleteMany takes no limit) that holds the server briefly. */
  private async deleteBatch(
    filter: mongo.Filter<JobDocument>,
    sort: mongo.Sort | undefined,
    limit: number,
  ): Promise<DeleteBatch> {
    const rows = await this.collection.find(filter, { projection: { _id: 1 }, sort, limit }).toArray();
    if (rows.length === 0) return { found: 0, deleted: 0 };
    const result = await this.collection.deleteMany({ ...filter, _id: { $in: rows.map((row) => row._id) } });
    return { found: rows.length, deleted: result.deletedCount };
  }

  async countByStatus(): Promise<Map<JobStatus, number>> {
    const rows = await this.collection
      .aggregate<{ _id: JobStatus; count: number }>([{ $group: { _id: '$status', count: { $sum: 1 } } }])
      .toArray();
    return new Map(rows.map((row) => [row._id, row.count]));
  }

  /**
   * Up to `limit` rows matching a validated list query, newest first by `_id` (BSON order across id types, so rows
   * with a foreign `_id` are paged too). Served by `_id` alone, or `list_by_status` / `list_by_name` with a filter.
   */
  listJobs(query: JobListQuery, limit: number): Promise<JobDocument[]> {
    const and: mongo.Filter<JobDocument>[] = [];
    if (query.search !== undefined) {
      and.push({
        $or: [{ _id: { $in: query.search.ids } }, { dedupeKey: query.search.key }],
      } as mongo.Filter<JobDocument>);
    }
    if (query.after !== undefined) and.push(idsBefore(query.after) as mongo.Filter<JobDocument>);
    const filter: mongo.Filter<JobDocument> = {
      ...(query.statuses && { status: query.statuses.length === 1 ? query.statuses[0] : { $in: query.statuses } }),
      ...(query.name !== undefined && { name: query.name }),
      ...((query.from ?? query.to) && {
        createdAt: { ...(query.from && { $gte: query.from }), ...(query.to && { $lt: query.to }) },
      }),
      ...(and.length === 1 ? and[0] : and.length > 1 && { $and: and }),
    };
    return this.collection.find(filter, { sort: { _id: -1 }, limit }).toArray() as Promise<JobDocument[]>;
  }

  /** Rows per name and status (the whole collection: one group pass, like `countByStatus`). */
  countByNameAndStatus(): Promise<{ _id: { name: string; status: JobStatus }; count: number }[]> {
    return this.collection
      .aggregate<{ _id: { name: string; status: JobStatus }; count: number }>([
        { $group: { _id: { name: '$name', status: '$status' }, count: { $sum: 1 } } },
      ])
      .toArray();
  }

  /** Per name, the earliest `runAt` of its due pending rows: how long the oldest waiting job has waited. */
  oldestDuePending(now: Date): Promise<{ _id: string; runAt: Date }[]> {
    return this.collection
      .aggregate<{ _id: string; runAt: Date }>([
        { $match: dueFilter(now) },
        { $group: { _id: '$name', runAt: { $min: '$runAt' } } },
      ])
      .toArray();
  }

  /**
   * Rows of `names` per name, final status and `bucketMs`-wide bucket (aligned on the epoch: `bucket` is its start in
   * ms) of those finished in [from, until). Date arithmetic rather than `$dateTrunc`, which older servers lack.
   */
  finishedPerBucket(
    statuses: readonly FinishedStatus[],
    from: Date,
    until: Date,
    bucketMs: number,
    names: readonly string[],
  ): Promise<{ _id: { name: string; status: FinishedStatus; bucket: number }; count: number }[]> {
    return this.collection
      .aggregate<{ _id: { name: string; status: FinishedStatus; bucket: number }; count: number }>([
        {
          $match: { status: { $in: [...statuses] }, name: { $in: [...names] }, finishedAt: { $gte: from, $lt: until } },
        },
        { $group: { _id: { name: '$name', status: '$status', bucket: finishedBucket(bucketMs) }, count: { $sum: 1 } } },
      ])
      .toArray();
  }

  /** As `finishedPerBucket`, every job name together: one group per status and bucket, however many names. */
  finishedTotalPerBucket(
    statuses: readonly FinishedStatus[],
    from: Date,
    until: Date,
    bucketMs: number,
  ): Promise<{ _id: { status: FinishedStatus; bucket: number }; count: number }[]> {
    return this.collection
      .aggregate<{ _id: { status: FinishedStatus; bucket: number }; count: number }>([
        // Rows without a string name are counted under no name, so not in the total either.
        {
          $match: { status: { $in: [...statuses] }, name: { $type: 'string' }, finishedAt: { $gte: from, $lt: until } },
        },
        { $group: { _id: { status: '$status', bucket: finishedBucket(bucketMs) }, count: { $sum: 1 } } },
      ])
      .toArray();
  }

  /**
   * For `drain`: per name and status, the rows of `names` that are `running`, or `pending` with `runAt` before
   * `before`, and the smallest `_id` of each group. Each branch of the `$or` is an equality on `status`, an `$in` on
   * `name` and (pending) a range on `runAt`: both are served by `claim_by_name`, so jobs delayed past `before` and
   * finished jobs are never read. `expiredLeases` counts the running rows whose `lockedUntil` is not after `now`.
   */
  countUnfinished(names: readonly string[], before: Date, now: Date): Promise<UnfinishedGroup[]> {
    const name = { $in: [...names] };
    return this.collection
      .aggregate<UnfinishedGroup>([
        {
          $match: {
            $or: [
              { status: 'running', name },
              { status: 'pending', name, runAt: { $lt: before } },
            ],
          },
        },
        {
          $group: {
            _id: { name: '$name', status: '$status' },
            count: { $sum: 1 },
            firstId: { $min: '$_id' },
            // Running rows whose owner stopped renewing: only a worker that runs the name reclaims them.
            expiredLeases: {
              $sum: {
                $cond: [{ $and: [{ $eq: ['$status', 'running'] }, { $lte: ['$lockedUntil', now] }] }, 1, 0],
              },
            },
          },
        },
        { $sort: { '_id.name': 1, '_id.status': 1 } },
      ])
      .toArray();
  }

  /** Round trip to the server (health checks). */
  async ping(): Promise<void> {
    const db = this.model.db.db;
    if (!db) throw new Error('The MongoDB connection is not open');
    await db.command({ ping: 1 });
  }

  private async updateOwned(
    id: Types.ObjectId,
    lockId: string,
    update: mongo.UpdateFilter<JobDocument>,
    options?: mongo.UpdateOptions,
  ): Promise<boolean> {
    const result = await this.collection.updateOne(owned(id, lockId), update, options);
    return result.matchedCount === 1;
  }
}

/**
 * The owner-fenced renewal write: the deadline only ever moves forward. The lock id proves ownership (a reclaim writes
 * a new one, with a new fencing token), so the fence has no deadline check: the lease never sends a renewal past its
 * own deadline, and one that left before it but reaches the server after it still renews a row nobody took over (a
 * check by the writer's clock at send time refused the beat that fell on the deadline). One that lands after the
 * watchdog ended the lease is handed back (`relinquishLease`).
 */
function leaseRenewal(
  { id, lockId, requestedUntil, progress, leaseMs }: LeaseRenewal,
  now: Date,
): { filter: mongo.Filter<JobDocument>; update: mongo.UpdateFilter<JobDocument> } {
  return {
    filter: owned(id, lockId),
    update: {
      $max: { lockedUntil: requestedUntil },
      $set: {
        updatedAt: now,
        ...(progress !== undefined && { progress }),
        ...(leaseMs !== undefined && { leaseMs }),
      },
    },
  };
}

/** One lease renewal of a `renewLeases` command. */
export interface LeaseRenewal {
  id: Types.ObjectId;
  lockId: string;
  requestedUntil: Date;
  /** The handler's latest progress, written by the same owner-fenced update (none: progress is left as it is). */
  progress?: JobProgress;
  /** The lease the owner runs under, recorded on the row (what a cancel raises `lockedUntil` by). */
  leaseMs?: number;
}

/** What a `renewLeases` command did: rows matched in total, and the ops the server refused, by index. */
export interface LeaseRenewalsResult {
  matched: number;
  /** The refused ops by index, each a `MongoServerError` as a single write's refusal. */
  refused: Map<number, Error>;
}

/** The lease fields of a row, as `readLeaseOwners` reads them. */
export type LeaseOwner = Pick<JobDocument, '_id' | 'lockedBy' | 'status' | 'lockedUntil' | 'finishedBy'>;
const LEASE_OWNER_FIELDS = { lockedBy: 1, status: 1, lockedUntil: 1, finishedBy: 1 } as const;

/** The repository methods a lease renewal uses (a narrow port, so the batcher's unit tests need no database). */
export type LeaseRenewalStore = Pick<JobsRepository, 'renewLease' | 'renewLeases' | 'readLeaseOwners'>;

/**
 * The per-op write errors of a bulk write that failed only op by op, each as the `MongoServerError` a single-document
 * write would have rejected with; undefined when the command itself failed (no write errors, or a write concern
 * error, which says nothing about which op it hit).
 */
function refusedWrites(error: unknown): Map<number, mongo.MongoServerError> | undefined {
  if (!(error instanceof mongo.MongoBulkWriteError) || error.writeConcernError) return undefined;
  const writeErrors = [error.writeErrors].flat();
  if (writeErrors.length === 0) return undefined;
  return new Map(
    writeErrors.map((writeError) => [
      writeError.index,
      new mongo.MongoServerError({
        message: writeError.errmsg ?? 'write refused',
        code: writeError.code,
        errInfo: writeError.errInfo,
      }),
    ]),
  );
}

/**
 * The error a failed bulk command rejects with as a single write would have: the driver wraps a network or timeout
 * error of `bulkWrite` in a `MongoBulkWriteError` (keeping the original as its `errorResponse`); unwrapped, a batched
 * renewal fails with the same `MongoNetworkError` as `renewLease`.
 */
function commandError(error: unknown): unknown {
  if (!(error instanceof mongo.MongoBulkWriteError) || [error.writeErrors].flat().length > 0) return error;
  return error.errorResponse instanceof Error ? error.errorResponse : error;
}

/** The fence on every write an execution makes: only the current owner of a running row may change it. */
function owned(id: Types.ObjectId, lockId: string): mongo.Filter<JobDocument> {
  return { _id: id, lockedBy: lockId, status: 'running' };
}

/** A row that cannot run as stored: failed, with the reason, its lease and dedupe scope released. */
function failedUpdate(reason: string, now: Date, expiresAt?: Date): mongo.UpdateFilter<JobDocument> {
  return {
    $set: { status: 'failed', lastError: reason, finishedAt: now, updatedAt: now, ...expiry(expiresAt) },
    $unset: RELEASED_FIELDS,
  };
}

/** The `$set` part of a finishing write's retention stamp. */
function expiry(expiresAt?: Date): { expiresAt?: Date } {
  return expiresAt === undefined ? {} : { expiresAt };
}

/**
 * Rows that are not a cron tick's, or whose tick is past `CRON_TICK_KEEP_MS`: until then a tick's row is what keeps
 * the tick exactly-once. `runAt` is never before the tick (see `expiryOf`), and is a field every row has.
 */
function ticksPastKeep(now: Date): mongo.Filter<JobDocument> {
  return { $or: [{ scheduleKey: { $exists: false } }, { runAt: { $lt: addMs(now, -CRON_TICK_KEEP_MS) } }] };
}

/**
 * Rows no handler may still be running for: no `lockedUntil`, or one passed. A row cancelled while running keeps its
 * (raised) deadline and its fleet-limit slots until then; deleting it earlier would free those slots.
 */
function settledBy(now: Date): mongo.Filter<JobDocument> {
  return { lockedUntil: { $not: { $gt: now } } };
}

/** What `cancel` reads of a row before its write. */
type CancelSubject = Pick<JobDocument, '_id' | 'status' | 'lockedUntil' | 'leaseMs'>;
const CANCEL_SUBJECT = { status: 1, lockedUntil: 1, leaseMs: 1 } as const;

/**
 * Until when a cancelled run's handler may still run: a running row's deadline plus its recorded lease (the owner
 * learns of the cancel by that deadline, then has one lease to settle). Undefined for a row that is not running.
 */
function settleDeadline(row: Pick<JobDocument, 'status' | 'lockedUntil' | 'leaseMs'>, fallbackLeaseMs: number) {
  if (row.status !== 'running' || !(row.lockedUntil instanceof Date)) return undefined;
  const leaseMs = typeof row.leaseMs === 'number' && row.leaseMs > 0 ? row.leaseMs : fallbackLeaseMs;
  return addMs(row.lockedUntil, leaseMs);
}

/** The later of two optional dates. */
function latest(a: Date | undefined, b: Date | undefined): Date | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return a > b ? a : b;
}

/** What `purge` deletes: rows of one finished status, optionally of one name and finished before a date. */
export interface PurgeFilter {
  status: FinishedStatus;
  name?: string;
  finishedBefore?: Date;
}

/** One bounded delete: rows found by its read, and how many of them it deleted (others may have been first). */
export interface DeleteBatch {
  found: number;
  deleted: number;
}

/** The start (ms since the epoch) of the `bucketMs`-wide bucket holding a row's `finishedAt`. */
function finishedBucket(bucketMs: number): Record<string, unknown> {
  const finishedMs = { $subtract: ['$finishedAt', new Date(0)] };
  return { $subtract: [finishedMs, { $mod: [finishedMs, bucketMs] }] };
}
