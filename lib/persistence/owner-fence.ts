import type { mongo, Types } from 'mongoose';
import type { JobDocument } from '../model/job-document.js';

/** The fence on every write an execution makes: only the current owner of a running row may change it. */
export function owned(id: Types.ObjectId, lockId: string): mongo.Filter<JobDocument> {
  return { _id: id, lockedBy: lockId, status: 'running' };
}

/** An owner-fenced update of one row: whether this lock still owned it (the update matched). */
export async function updateOwned(
  collection: mongo.Collection<JobDocument>,
  id: Types.ObjectId,
  lockId: string,
  update: mongo.UpdateFilter<JobDocument>,
  options?: mongo.UpdateOptions,
): Promise<boolean> {
  const result = await collection.updateOne(owned(id, lockId), update, options);
  return result.matchedCount === 1;
}
