import { Inject, Injectable } from '@nestjs/common';
import type { Model, mongo } from 'mongoose';
import type { JobDocument } from '../model/job-document.js';
import { FINISHED_STATUSES } from '../model/job-record.js';
import { JOBS_MODEL } from '../model/jobs.constants.js';
import { type DeleteBatch, deleteBatch, settledBy, ticksPastKeep } from './bounded-delete.js';
import { jobsCollection } from './jobs-collection.js';

/** Retention's sweep: deletes expired finished rows in bounded batches. */
@Injectable()
export class JobRetentionStore {
  private readonly collection: mongo.Collection<JobDocument>;

  constructor(@Inject(JOBS_MODEL) model: Model<JobDocument>) {
    this.collection = jobsCollection(model);
  }

  /**
   * Deletes up to `limit` finished rows whose expiry has passed, oldest expiry first (read by the `retention` index),
   * never a cron tick's row within `CRON_TICK_KEEP_MS` of its tick, nor a cancelled run's row before its
   * `lockedUntil` (its handler may still run, and the row holds its fleet-limit slots). The delete repeats the read's filter, so a row
   * retried in between stays; several processes deleting at once only find fewer rows. `found` < `limit`: no more.
   */
  async deleteExpired(now: Date, limit: number): Promise<DeleteBatch> {
    return deleteBatch(
      this.collection,
      { expiresAt: { $lte: now }, status: { $in: [...FINISHED_STATUSES] }, ...ticksPastKeep(now), ...settledBy(now) },
      { expiresAt: 1 },
      limit,
    );
  }
}
