import type { Model, mongo } from 'mongoose';
import type { JobDocument } from '../model/job-document.js';
import type { ResolvedJobsOptions } from '../model/jobs.options.js';

/**
 * A collection next to the jobs collection, `<collectionName>_<suffix>` (workers, paused names, rate tokens), on the
 * jobs model's connection: the same database, and the same buffering until it is open.
 */
export function siblingCollection<T extends mongo.Document>(
  model: Model<JobDocument>,
  options: Pick<ResolvedJobsOptions, 'collectionName'>,
  suffix: string,
): mongo.Collection<T> {
  return model.db.collection(`${options.collectionName}_${suffix}`) as unknown as mongo.Collection<T>;
}
