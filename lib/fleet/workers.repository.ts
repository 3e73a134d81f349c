import { Inject, Injectable } from '@nestjs/common';
import type { Model, mongo } from 'mongoose';
import type { JobDocument } from '../model/job-document.js';
import { JOBS_MODEL, JOBS_RESOLVED_OPTIONS } from '../model/jobs.constants.js';
import type { ResolvedJobsOptions } from '../model/jobs.options.js';
import { siblingCollection } from '../persistence/sibling-collection.js';
import type { WorkerPresence, WorkerPresenceDocument } from './worker-presence.js';

/** Every query and update on the presence collection, `<collectionName>_workers`, next to the jobs collection. */
@Injectable()
export class WorkersRepository {
  private readonly collection: mongo.Collection<WorkerPresenceDocument>;

  constructor(
    @Inject(JOBS_MODEL) model: Model<JobDocument>,
    @Inject(JOBS_RESOLVED_OPTIONS) options: ResolvedJobsOptions,
  ) {
    this.collection = siblingCollection<WorkerPresenceDocument>(model, options, 'workers');
  }

  /**
   * Creates or refreshes a worker's document. Every field is set, `startedAt` too: a process reusing the workerId of
   * one that died without removing its document reports its own start, not the dead one's.
   */
  async upsert(workerId: string, presence: WorkerPresence): Promise<void> {
    await this.collection.updateOne({ _id: workerId }, { $set: presence }, { upsert: true });
  }

  async remove(workerId: string): Promise<void> {
    await this.collection.deleteOne({ _id: workerId });
  }

  /** Workers whose last refresh is recent enough, by workerId. */
  findLive(now: Date): Promise<WorkerPresenceDocument[]> {
    return this.collection.find({ liveUntil: { $gt: now } }, { sort: { _id: 1 } }).toArray();
  }

  /** Deletes up to `limit` documents past their `removeAfter` (ids first: deleteMany takes no limit). */
  async deleteStale(now: Date, limit: number): Promise<number> {
    const filter = { removeAfter: { $lt: now } };
    const rows = await this.collection.find(filter, { projection: { _id: 1 }, limit }).toArray();
    if (rows.length === 0) return 0;
    const result = await this.collection.deleteMany({ ...filter, _id: { $in: rows.map((row) => row._id) } });
    return result.deletedCount;
  }
}
