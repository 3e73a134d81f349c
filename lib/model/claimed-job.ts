import type { JobDocument } from '../persistence/job.schema.js';

/** A row this process now owns (`lockedBy === lockId`, status `running`). */
export interface ClaimedJob {
  doc: JobDocument;
  lockId: string;
}
