import { Inject, Injectable } from '@nestjs/common';
import type { Model, mongo } from 'mongoose';
import type { JobDocument } from '../model/job-document.js';
import { JOBS_MODEL, JOBS_RESOLVED_OPTIONS } from '../model/jobs.constants.js';
import type { ResolvedJobsOptions } from '../model/jobs.options.js';
import { siblingCollection } from './sibling-collection.js';

/** One paused name in `<collectionName>_paused`: the name is the `_id`, so a name is paused once, whoever asks. */
export interface PausedNameDocument {
  _id: string;
  /** When the pause was first asked for (a repeated pause keeps it). */
  pausedAt: Date;
}

/** Every read and write of the paused names, in `<collectionName>_paused` next to the jobs collection. */
@Injectable()
export class PausedNamesStore {
  private readonly collection: mongo.Collection<PausedNameDocument>;

  constructor(
    @Inject(JOBS_MODEL) model: Model<JobDocument>,
    @Inject(JOBS_RESOLVED_OPTIONS) options: ResolvedJobsOptions,
  ) {
    this.collection = siblingCollection<PausedNameDocument>(model, options, 'paused');
  }

  /** Pauses `name` (an upsert on its `_id`: idempotent, and two callers at once store one document). */
  async pause(name: string, at: Date): Promise<void> {
    await this.collection.updateOne({ _id: name }, { $setOnInsert: { pausedAt: at } }, { upsert: true });
  }

  /** Resumes `name`; whether it was paused. */
  async resume(name: string): Promise<boolean> {
    return (await this.collection.deleteOne({ _id: name })).deletedCount === 1;
  }

  /**
   * Every paused name, by name (`limit`: at most that many, to bound a read of a collection someone filled), from the
   * primary: a pause just made must be seen, whatever the application's read preference.
   */
  findAll(limit: number): Promise<PausedNameDocument[]> {
    return this.collection.find({}, { sort: { _id: 1 }, limit, readPreference: 'primary' }).toArray();
  }

  /** How many names are paused (a cap on pausing more), from the primary. */
  count(): Promise<number> {
    return this.collection.countDocuments({}, { readPreference: 'primary' });
  }

  /** Whether `name` is paused now, read from the primary (a pause just made elsewhere must be seen). */
  async isPaused(name: string): Promise<boolean> {
    const found = await this.collection.findOne({ _id: name }, { projection: { _id: 1 }, readPreference: 'primary' });
    return found !== null;
  }
}
