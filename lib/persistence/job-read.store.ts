import { Inject, Injectable } from '@nestjs/common';
import type { Model, mongo, Types } from 'mongoose';
import type { JobDocument } from '../model/job-document.js';
import type { FinishedStatus, JobStatus } from '../model/job-record.js';
import { JOBS_MODEL } from '../model/jobs.constants.js';
import { dueFilter } from './claim-queries.js';
import { jobsCollection } from './jobs-collection.js';
import { idsBefore } from './list-cursor.js';
import type { JobListQuery } from './list-jobs-options.js';

/** One name and status of `countUnfinished`: how many rows, the smallest id, and how many leases have run out. */
export interface UnfinishedGroup {
  _id: { name: string; status: 'pending' | 'running' };
  count: number;
  firstId: unknown;
  expiredLeases: number;
}

/** Reads that change nothing: one row, lists, counts and aggregates (metrics, telemetry, drain), and the ping. */
@Injectable()
export class JobReadStore {
  private readonly collection: mongo.Collection<JobDocument>;

  constructor(@Inject(JOBS_MODEL) private readonly model: Model<JobDocument>) {
    this.collection = jobsCollection(model);
  }

  /** The row with this id, as stored. */
  findById(id: Types.ObjectId): Promise<JobDocument | null> {
    return this.collection.findOne({ _id: id });
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

  /** Rows per status (the whole collection: one group pass). */
  async countByStatus(): Promise<Map<JobStatus, number>> {
    const rows = await this.collection
      .aggregate<{ _id: JobStatus; count: number }>([{ $group: { _id: '$status', count: { $sum: 1 } } }])
      .toArray();
    return new Map(rows.map((row) => [row._id, row.count]));
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
}

/** The start (ms since the epoch) of the `bucketMs`-wide bucket holding a row's `finishedAt`. */
function finishedBucket(bucketMs: number): Record<string, unknown> {
  const finishedMs = { $subtract: ['$finishedAt', new Date(0)] };
  return { $subtract: [finishedMs, { $mod: [finishedMs, bucketMs] }] };
}
