import { Inject, Injectable } from '@nestjs/common';
import type { Model, mongo, Types } from 'mongoose';
import type { GuaranteeIndex } from '../model/errors/guarantee-index.js';
import type { JobDocument } from '../model/job-document.js';
import { JOBS_MODEL } from '../model/jobs.constants.js';
import type { NewJobDocument } from '../model/new-job-document.js';
import { clashesOn, rejectedJob } from './dedupe-clash.js';
import { isDuplicateKey } from './duplicate-key.js';
import { DEBOUNCE_SCOPE_INDEX, THROTTLE_SCOPE_INDEX } from './guarantee-indexes.js';
import { jobsCollection } from './jobs-collection.js';
import { DEBOUNCE_FIELDS, USER_VALUE_OPTIONS } from './row-fields.js';

/**
 * What taking a window's scope did: stored the job; found the row holding the scope; or clashed with another upsert
 * of the same scope racing it (out of a transaction: look again).
 */
export type ScopeTakeOutcome =
  | { kind: 'inserted'; doc: JobDocument }
  | { kind: 'held'; holder: JobDocument }
  | { kind: 'raced'; error: unknown };

/** The scope fields of throttled and debounced jobs, each kept unique by its own index. */
type WindowScopeField = 'throttleScope' | 'debounceScope';

const INDEX_OF: Record<WindowScopeField, GuaranteeIndex> = {
  throttleScope: THROTTLE_SCOPE_INDEX,
  debounceScope: DEBOUNCE_SCOPE_INDEX,
};

/** Stores throttled and debounced jobs: one upsert keyed by the window's scope, and the debounce replacement. */
@Injectable()
export class JobWindowStore {
  private readonly collection: mongo.Collection<JobDocument>;

  constructor(@Inject(JOBS_MODEL) model: Model<JobDocument>) {
    this.collection = jobsCollection(model);
  }

  /**
   * Stores `doc` unless a row holds its scope, in one command that never fails on the scope inside a transaction
   * (an upsert keyed by it, `$setOnInsert` the job), and resolves the holder otherwise.
   * @throws UniqueIndexRejectedJobError when another unique index (the application's) rejects the job.
   */
  async take(doc: NewJobDocument, field: WindowScopeField, session?: mongo.ClientSession): Promise<ScopeTakeOutcome> {
    const scope = doc[field] as string;
    // The scope comes from the filter: an upsert seeds the new row with the filter's equality fields.
    const { [field]: _scope, ...fields } = doc;
    try {
      const row = (await this.collection.findOneAndUpdate(
        { [field]: scope },
        { $setOnInsert: fields },
        { ...USER_VALUE_OPTIONS, session, upsert: true, returnDocument: 'after' },
      )) as JobDocument;
      // Stored: the caller's own document, so its record carries the payload as given (as an insert's does).
      return row._id.equals(doc._id) ? { kind: 'inserted', doc: { ...doc } } : { kind: 'held', holder: row };
    } catch (error) {
      if (!isDuplicateKey(error)) throw error;
      if (await clashesOn(this.collection, error, INDEX_OF[field], { [field]: scope }, session)) {
        // Inside a transaction the clash aborted it: its caller's retry (`withTransaction`) finds the holder.
        if (session?.inTransaction()) throw error;
        return { kind: 'raced', error };
      }
      throw rejectedJob(this.collection, error, doc, error);
    }
  }

  /**
   * Gives the pending job holding `scope` the payload and `runAt` of a later enqueue, unless that `runAt` is past its
   * `debounceUntil` (`byId`: only that row, and `runAt` as given, for a job whose deadline the caller has read).
   * Resolves the row afterwards, or null when no pending job holds the scope under those conditions.
   */
  async replace(
    doc: Pick<NewJobDocument, 'name' | 'payload'>,
    scope: string,
    runAt: Date,
    now: Date,
    session?: mongo.ClientSession,
    byId?: Types.ObjectId,
  ): Promise<JobDocument | null> {
    const deadline = byId
      ? { _id: byId }
      : { $or: [{ debounceUntil: { $exists: false } }, { debounceUntil: { $gte: runAt } }] };
    try {
      return await this.collection.findOneAndUpdate(
        { debounceScope: scope, status: 'pending', ...deadline },
        { $set: { payload: doc.payload, runAt, updatedAt: now } },
        { ...USER_VALUE_OPTIONS, session, returnDocument: 'after' },
      );
    } catch (error) {
      // Only an index on the payload (the application's) can refuse a new payload: the scope does not change.
      if (isDuplicateKey(error)) throw rejectedJob(this.collection, error, doc, error);
      throw error;
    }
  }

  /**
   * Unsets a debounce scope that a row no longer pending still carries: a worker of an older version, which knew no
   * debounce, claimed it. A pending row never matches, so this cannot take a key from its holder.
   */
  async freeStaleDebounceScope(scope: string, session?: mongo.ClientSession): Promise<void> {
    await this.collection.updateMany(
      { debounceScope: scope, status: { $ne: 'pending' } },
      { $unset: DEBOUNCE_FIELDS },
      { session },
    );
  }
}
