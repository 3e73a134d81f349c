import { Inject, Injectable } from '@nestjs/common';
import type { Model, mongo, Types } from 'mongoose';
import type { JobDocument } from '../model/job-document.js';
import type { LogBatch } from '../model/job-log.js';
import type { JobProgress } from '../model/job-record.js';
import { JOBS_MODEL } from '../model/jobs.constants.js';
import { commandError, refusedWrites } from './bulk-write-errors.js';
import { jobsCollection } from './jobs-collection.js';
import { logLinesUpdate } from './log-lines-update.js';
import { owned } from './owner-fence.js';
import { USER_VALUE_OPTIONS } from './row-fields.js';

/** The running row's lease: owner-fenced renewals (one or a batch), who holds a lease now, and giving one back. */
@Injectable()
export class JobLeaseStore {
  private readonly collection: mongo.Collection<JobDocument>;

  constructor(@Inject(JOBS_MODEL) model: Model<JobDocument>) {
    this.collection = jobsCollection(model);
  }

  /**
   * Owner-fenced lease renewal: the deadline only ever moves forward; sets `progress` too when one is given,
   * `leaseMs` (the lease the owner runs under) when given, and appends the `logs` lines when given. Resolves the row's deadline after the write, or null when
   * this lock no longer owns the row.
   */
  async renewLease(
    id: Types.ObjectId,
    lockId: string,
    requestedUntil: Date,
    now: Date,
    progress?: JobProgress,
    leaseMs?: number,
    logs?: LogBatch,
  ): Promise<Date | null> {
    const { filter, update } = leaseRenewal({ id, lockId, requestedUntil, progress, leaseMs, logs }, now);
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

  /** Moves a lease this lock holds back to `until` (a renewal that landed after its watchdog ended the lease). */
  async relinquishLease(id: Types.ObjectId, lockId: string, until: Date): Promise<void> {
    await this.collection.updateOne(owned(id, lockId), { $min: { lockedUntil: until } });
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
  { id, lockId, requestedUntil, progress, leaseMs, logs }: LeaseRenewal,
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
      ...logLinesUpdate(logs),
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
  /** Lines the handler logged since the last write that carried some, appended by the same update. */
  logs?: LogBatch;
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

/** The lease store methods a renewal uses (a narrow port, so the batcher's unit tests need no database). */
export type LeaseRenewalStore = Pick<JobLeaseStore, 'renewLease' | 'renewLeases' | 'readLeaseOwners'>;
