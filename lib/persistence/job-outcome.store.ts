import { Inject, Injectable } from '@nestjs/common';
import type { Model, mongo, Types } from 'mongoose';
import type { JobDocument } from '../model/job-document.js';
import type { LogBatch } from '../model/job-log.js';
import type { JobAttempt, JobProgress } from '../model/job-record.js';
import { JOBS_MODEL, MAX_ATTEMPT_HISTORY } from '../model/jobs.constants.js';
import { expiry, failedUpdate } from './finishing-updates.js';
import { jobsCollection } from './jobs-collection.js';
import { logLinesUpdate } from './log-lines-update.js';
import { OwnedUpdateBatcher } from './owned-update-batcher.js';
import { updateOwned } from './owner-fence.js';
import { PlainCommands } from './plain-commands.js';
import { LOCK_FIELDS, RELEASED_FIELDS } from './row-fields.js';

/**
 * The owner-fenced writes that end a run: completed, failed attempt, dead, failed as stored, released. Completions and
 * failed attempts sent in one event-loop turn share one command (`OwnedUpdateBatcher`), each answered as if sent
 * alone. The others go out at once, unbatched: a hand-back of a claim that will not start must reach the server before
 * this worker's next claim, whose reclaim search would otherwise find the row expired and charge it an attempt.
 */
@Injectable()
export class JobOutcomeStore {
  private readonly collection: mongo.Collection<JobDocument>;
  private readonly batcher: OwnedUpdateBatcher;

  constructor(@Inject(JOBS_MODEL) model: Model<JobDocument>) {
    this.collection = jobsCollection(model);
    this.batcher = new OwnedUpdateBatcher(this.collection, PlainCommands.of(model));
  }

  /**
   * Whether the run of `lockId` ended this row: its finishing write landed (see `finishedBy`), whatever its answer
   * said. Read after a finishing write whose answer was lost, before it counts as not this worker's any more.
   */
  async finishedBy(id: Types.ObjectId, lockId: string): Promise<boolean> {
    return (await this.collection.countDocuments({ _id: id, finishedBy: lockId }, { limit: 1 })) === 1;
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
    {
      result,
      progress,
      expiresAt,
      logs,
    }: { result?: unknown; progress?: JobProgress; expiresAt?: Date; logs?: LogBatch } = {},
  ): Promise<boolean> {
    return this.batcher.update(id, lockId, {
      ...logLinesUpdate(logs),
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
    });
  }

  /**
   * Records a failed attempt, then either schedules the retry or dead-letters the job; appends the lines the attempt
   * logged since its last renewal.
   */
  recordFailure(
    id: Types.ObjectId,
    lockId: string,
    attempt: JobAttempt,
    next: { status: 'pending'; runAt: Date } | { status: 'dead'; expiresAt?: Date },
    logs?: LogBatch,
  ): Promise<boolean> {
    const lines = logLinesUpdate(logs);
    const history = { attempts: { $each: [attempt], $slice: -MAX_ATTEMPT_HISTORY }, ...lines.$push };
    const counters = { attemptCount: 1, ...lines.$inc };
    const common = { lastError: attempt.error, updatedAt: attempt.at, finishedBy: lockId };
    return this.batcher.update(
      id,
      lockId,
      next.status === 'pending'
        ? {
            $set: { ...common, status: 'pending', runAt: next.runAt },
            $unset: LOCK_FIELDS,
            $inc: counters,
            $push: history,
          }
        : {
            $set: { ...common, status: 'dead', finishedAt: attempt.at, ...expiry(next.expiresAt) },
            $unset: RELEASED_FIELDS,
            $inc: counters,
            $push: history,
          },
    );
  }

  /** Dead-letters a job this lock owns without recording another attempt (the reclaim already did). */
  deadLetter(id: Types.ObjectId, lockId: string, now: Date, expiresAt?: Date): Promise<boolean> {
    return updateOwned(this.collection, id, lockId, {
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
    return updateOwned(this.collection, id, lockId, {
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

  /** Gives a job back untouched (shutdown): pending again, no attempt counted; keeps the lines it logged. */
  release(id: Types.ObjectId, lockId: string, now: Date, logs?: LogBatch): Promise<boolean> {
    return updateOwned(this.collection, id, lockId, {
      ...logLinesUpdate(logs),
      $set: { status: 'pending', runAt: now, updatedAt: now, finishedBy: lockId },
      $unset: LOCK_FIELDS,
    });
  }

  /** Moves a job this lock owns to `failed`: it cannot run as stored (the claim gave back a row no handler accepts). */
  markFailed(id: Types.ObjectId, lockId: string, reason: string, now: Date, expiresAt?: Date): Promise<boolean> {
    const update = failedUpdate(reason, now, expiresAt);
    return updateOwned(this.collection, id, lockId, { ...update, $set: { ...update.$set, finishedBy: lockId } });
  }
}
