import type { JobDocument } from './job-document.js';

/** A row this process now owns (`lockedBy === lockId`, status `running`). */
export interface ClaimedJob {
  doc: JobDocument;
  lockId: string;
}
