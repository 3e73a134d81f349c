import { Inject, Injectable } from '@nestjs/common';
import type { Model, mongo } from 'mongoose';
import type { JobDocument } from '../model/job-document.js';
import { JOBS_MODEL } from '../model/jobs.constants.js';
import { jobsCollection } from './jobs-collection.js';

/**
 * How long the server holds an idle stream's `getMore` before answering an empty batch: an event is sent as soon as it
 * happens whatever this is, so it only sets an idle stream's cost (one `getMore` per this long).
 */
export const CHANGE_STREAM_AWAIT_MS = 10_000;

/** A change that may have made a job claimable, as the stream's `$project` leaves it. */
export interface JobChange {
  /** The resume token. */
  _id: unknown;
  operationType: string;
  /** The row's `runAt` when the change carried one (an insert, or an update that set it); null: due now, as far as known. */
  runAt?: Date | null;
}

/**
 * The stream's pipeline: only the changes that can make a job of `names` claimable now or at a known time. An insert
 * or replacement of a pending row of those names (an enqueue); an update that set `status: 'pending'` (a retry's
 * backoff, a claim handed back, a cancelled run's row retried once its lease ends, a revived job) or moved a `runAt`
 * (a debounce, a promote): update events carry no name without an extra read per event, so those of any name pass.
 * Claims, renewals and outcomes (the bulk of the writes) match none. Each event keeps its resume token and the `runAt`
 * it carried, nothing else.
 */
export function claimableChangesPipeline(names: readonly string[]): mongo.Document[] {
  const pendingRow = { 'fullDocument.status': 'pending', 'fullDocument.name': { $in: [...names] } };
  return [
    {
      $match: {
        $or: [
          { operationType: { $in: ['insert', 'replace'] }, ...pendingRow },
          { operationType: 'update', 'updateDescription.updatedFields.status': 'pending' },
          { operationType: 'update', 'updateDescription.updatedFields.runAt': { $exists: true } },
        ],
      },
    },
    {
      $project: {
        operationType: 1,
        runAt: { $ifNull: ['$fullDocument.runAt', '$updateDescription.updatedFields.runAt', null] },
      },
    },
  ];
}

/** The jobs collection's change stream (replica sets and sharded clusters only). */
@Injectable()
export class JobChangesStore {
  private readonly collection: mongo.Collection<JobDocument>;

  constructor(@Inject(JOBS_MODEL) model: Model<JobDocument>) {
    this.collection = jobsCollection(model);
  }

  /**
   * A change stream of `claimableChangesPipeline(names)`, from `resumeAfter` when given (a token of an earlier stream
   * on this collection). Lazy: nothing is sent before the first `tryNext`.
   */
  watch(names: readonly string[], resumeAfter?: unknown): mongo.ChangeStream<JobDocument, JobChange> {
    return this.collection.watch<JobDocument, JobChange>(claimableChangesPipeline(names), {
      maxAwaitTimeMS: CHANGE_STREAM_AWAIT_MS,
      ...(resumeAfter !== undefined && { resumeAfter: resumeAfter as mongo.ResumeToken }),
    });
  }
}
