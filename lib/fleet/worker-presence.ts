import type { JobsWorker } from './jobs-worker.js';

/**
 * A worker's presence document in `<collectionName>_workers`. The writer stamps when it counts as gone and when it
 * may be deleted, from its own refresh interval: readers and cleaners on other intervals then judge it rightly.
 */
export interface WorkerPresenceDocument extends Omit<JobsWorker, 'workerId'> {
  /** The workerId. */
  _id: string;
  refreshIntervalMs: number;
  /** lastSeenAt + 3 refreshes: listed while this is in the future. */
  liveUntil: Date;
  /** lastSeenAt + 10 refreshes: deleted by any worker's cleanup after this. */
  removeAfter: Date;
}

/** What one refresh writes (`_id` is the workerId). */
export type WorkerPresence = Omit<WorkerPresenceDocument, '_id'>;

export function toJobsWorker(doc: WorkerPresenceDocument): JobsWorker {
  return {
    workerId: doc._id,
    host: doc.host,
    pid: doc.pid,
    startedAt: doc.startedAt,
    lastSeenAt: doc.lastSeenAt,
    concurrency: doc.concurrency,
    names: doc.names,
    ...(Array.isArray(doc.paused) && { paused: doc.paused }),
    running: doc.running,
    version: doc.version,
  };
}
