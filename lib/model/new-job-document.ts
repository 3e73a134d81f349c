import type { JobDocument } from './job-document.js';

/**
 * A job built for insertion. Its `_id` is generated when it is built (as the driver would at the insert), so this
 * process knows the job's id before the write is acknowledged (`JobEvents.holdWhileEnqueueing`).
 */
export type NewJobDocument = JobDocument;
