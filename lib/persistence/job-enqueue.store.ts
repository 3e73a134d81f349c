import { Inject, Injectable } from '@nestjs/common';
import type { Model, mongo } from 'mongoose';
import type { UniqueIndexRejectedJobError } from '../model/errors/unique-index-rejected-job.error.js';
import type { JobDocument } from '../model/job-document.js';
import { JOBS_MODEL } from '../model/jobs.constants.js';
import type { NewJobDocument } from '../model/new-job-document.js';
import { clashesOn, rejectedJob } from './dedupe-clash.js';
import { clashOn, duplicateKeyErrorsOnly, isDuplicateKey } from './duplicate-key.js';
import { DEDUPE_SCOPE_INDEX, SCHEDULE_INDEX } from './guarantee-indexes.js';
import { jobsCollection } from './jobs-collection.js';
import { LIVE } from './row-fields.js';

/** Payload keys whose value is `undefined` are left out, as JSON does, rather than stored as null. */
const INSERT_OPTIONS = { ignoreUndefined: true } as const;

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

/** Stores new jobs: inserts (one or a batch), and the dedupe scope's holders and upserts. */
@Injectable()
export class JobEnqueueStore {
  private readonly collection: mongo.Collection<JobDocument>;

  constructor(@Inject(JOBS_MODEL) private readonly model: Model<JobDocument>) {
    this.collection = jobsCollection(model);
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
    if (
      dedupeScope !== undefined &&
      (await clashesOn(this.collection, clash, DEDUPE_SCOPE_INDEX, { dedupeScope }, session))
    )
      return { kind: 'dedupe-clash', error: clash };
    if (
      scheduleKey !== undefined &&
      (await clashesOn(this.collection, clash, SCHEDULE_INDEX, { scheduleKey }, session))
    )
      return { kind: 'tick-exists' };
    return { kind: 'rejected', error: rejectedJob(this.collection, clash, doc, cause) };
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
      throw rejectedJob(this.collection, error, copy, error);
    }
  }
}
