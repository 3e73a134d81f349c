import type { mongo } from 'mongoose';
import { CRON_TICK_KEEP_MS } from '../model/catch-up-window.js';
import { addMs } from '../model/clock.js';
import type { JobDocument } from '../model/job-document.js';

/** Deleting finished rows in bounded batches (retention's sweep, `purge`), and the rows neither may delete yet. */

/** One bounded delete: rows found by its read, and how many of them it deleted (others may have been first). */
export interface DeleteBatch {
  found: number;
  deleted: number;
}

/** Reads ids then deletes by them: a bounded delete (deleteMany takes no limit) that holds the server briefly. */
export async function deleteBatch(
  collection: mongo.Collection<JobDocument>,
  filter: mongo.Filter<JobDocument>,
  sort: mongo.Sort | undefined,
  limit: number,
): Promise<DeleteBatch> {
  const rows = await collection.find(filter, { projection: { _id: 1 }, sort, limit }).toArray();
  if (rows.length === 0) return { found: 0, deleted: 0 };
  const result = await collection.deleteMany({ ...filter, _id: { $in: rows.map((row) => row._id) } });
  return { found: rows.length, deleted: result.deletedCount };
}

export /**
 * Rows that are not a cron tick's, or whose tick is past `CRON_TICK_KEEP_MS`: until then a tick's row is what keeps
 * the tick exactly-once. `runAt` is never before the tick (see `expiryOf`), and is a field every row has.
 */
function ticksPastKeep(now: Date): mongo.Filter<JobDocument> {
  return { $or: [{ scheduleKey: { $exists: false } }, { runAt: { $lt: addMs(now, -CRON_TICK_KEEP_MS) } }] };
}

export /**
 * Rows no handler may still be running for: no `lockedUntil`, or one passed. A row cancelled while running keeps its
 * (raised) deadline and its fleet-limit slots until then; deleting it earlier would free those slots.
 */
function settledBy(now: Date): mongo.Filter<JobDocument> {
  return { lockedUntil: { $not: { $gt: now } } };
}
