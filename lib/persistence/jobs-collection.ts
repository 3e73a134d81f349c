import type { Model, mongo } from 'mongoose';
import type { JobDocument } from '../model/job-document.js';

/** The jobs model's native collection: hot paths skip mongoose casting, which buys nothing for their fixed shapes. */
export function jobsCollection(model: Model<JobDocument>): mongo.Collection<JobDocument> {
  return model.collection as unknown as mongo.Collection<JobDocument>;
}
