import { Inject, Injectable } from '@nestjs/common';
import type { Model, mongo, Types } from 'mongoose';
import { addMs } from '../model/clock.js';
import { RetryContendedError } from '../model/errors/retry-contended.error.js';
import type { JobDocument } from '../model/job-document.js';
import type { FinishedStatus, JobStatus } from '../model/job-record.js';
import { DEDUPE_WRITE_TRIES, JOBS_MODEL } from '../model/jobs.constants.js';
import { type DeleteBatch, deleteBatch, settledBy, ticksPastKeep } from './bounded-delete.js';
import { clashesOn, rejectedJob } from './dedupe-clash.js';
import { dedupeScope } from './dedupe-scope.js';
import { isDuplicateKey } from './duplicate-key.js';
import { expiry } from './finishing-updates.js';
import { DEDUPE_SCOPE_INDEX } from './guarantee-indexes.js';
import { JobEnqueueStore } from './job-enqueue.store.js';
import { JobReadStore } from './job-read.store.js';
import { jobsCollection } from './jobs-collection.js';
import { DEBOUNCE_FIELDS, LIVE, LOCK_FIELDS } from './row-fields.js';

/**
 * Unset by cancel: like RELEASED_FIELDS but `lockedUntil` (raised by the cancel) and the slots stay: until that
 * deadline a cancelled run's handler may still run (`retry` makes the job due no earlier, and neither purge nor the
 * sweeper deletes the row), and it keeps counting against the limits.
 */
const CANCELLED_FIELDS = { lockedBy: '', dedupeScope: '', leaseMs: '', ...DEBOUNCE_FIELDS } as const;

const REVIVABLE: JobStatus[] = ['dead', 'failed', 'cancelled'];

/** What `retry` did: revived the row, found it in no revivable state, or found its key held by another live job. */
export type RetryResult =
  | { kind: 'revived'; job: JobDocument }
  | { kind: 'not-revivable' }
  | { kind: 'conflict'; job: JobDocument; holder: JobDocument };

/** What `purge` deletes: rows of one finished status, optionally of one name and finished before a date. */
export interface PurgeFilter {
  status: FinishedStatus;
  name?: string;
  finishedBefore?: Date;
}

/** An operator's changes to jobs: cancel, retry, purge. */
@Injectable()
export class JobAdminStore {
  private readonly collection: mongo.Collection<JobDocument>;

  constructor(
    @Inject(JOBS_MODEL) model: Model<JobDocument>,
    private readonly reads: JobReadStore,
    // `retry` takes a dedupe scope back as an enqueue does: its holders and stale scopes are the enqueue store's.
    private readonly enqueues: JobEnqueueStore,
  ) {
    this.collection = jobsCollection(model);
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
      const row = await this.reads.findById(id);
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
          (await clashesOn(this.collection, error, DEDUPE_SCOPE_INDEX, { dedupeScope: scope, _id: { $ne: id } }));
        if (!onScope) throw rejectedJob(this.collection, error, row, error);
        const [holder] = await this.enqueues.findLiveHolders([scope]);
        if (holder) return { kind: 'conflict', job: row, holder };
        await this.enqueues.freeStaleScope(scope);
      }
    }
    throw new RetryContendedError(id.toHexString(), DEDUPE_WRITE_TRIES);
  }

  /**
   * Makes a pending job due at `now`: its `runAt` moves earlier, never before the deadline a cancelled run left on it
   * (`lockedUntil` of a job retried after a cancel while running: that run's handler may still be settling), and never
   * for a cron tick's row (due at its tick already, unless enqueued ahead by tooling; its keep counts from it). Written
   * only over the row as read (status, `runAt` and `lockedUntil`), read again when it changed meanwhile. The row
   * afterwards, whether or not this call moved it (`promoted` says); null when there is no such job.
   */
  async promote(id: Types.ObjectId, now: Date): Promise<{ row: JobDocument; promoted: boolean } | null> {
    let row = await this.reads.findById(id);
    for (let tries = 0; row && tries < DEDUPE_WRITE_TRIES; tries += 1) {
      // A cron tick's row stays at its tick: its retention keep counts from there (what stops the tick running twice).
      if (row.status !== 'pending' || row.scheduleKey !== undefined) break;
      const earliest = row.lockedUntil instanceof Date && row.lockedUntil > now ? row.lockedUntil : now;
      // A `runAt` that is no date (a row written by other tools) is never due: any promote fixes it.
      if (row.runAt instanceof Date && row.runAt <= earliest) break;
      const promoted = await this.collection.findOneAndUpdate(
        {
          _id: id,
          status: 'pending',
          runAt: row.runAt,
          lockedUntil: row.lockedUntil === undefined ? { $exists: false } : row.lockedUntil,
        },
        { $set: { runAt: earliest, updatedAt: now } },
        { returnDocument: 'after' },
      );
      if (promoted) return { row: promoted, promoted: true };
      row = await this.reads.findById(id);
    }
    return row && { row, promoted: false };
  }

  /** What `cancel` needs to know of a row before its write: its name and tick (for the expiry to stamp). */
  findCancelSubject(id: Types.ObjectId): Promise<Pick<JobDocument, '_id' | 'name' | 'scheduleKey' | 'runAt'> | null> {
    return this.collection.findOne<Pick<JobDocument, '_id' | 'name' | 'scheduleKey' | 'runAt'>>(
      { _id: id },
      { projection: { name: 1, scheduleKey: 1, runAt: 1 } },
    );
  }

  /** `deleteExpired` for `purge`: up to `limit` rows of one finished status (and name, finished before a date). */
  async deleteFinished(filter: PurgeFilter, now: Date, limit: number): Promise<DeleteBatch> {
    return deleteBatch(
      this.collection,
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
