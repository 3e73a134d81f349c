import { JobsError } from './jobs.error.js';

/**
 * A unique index this version does not use (the application's own, or an older version's `dedupe`) rejected a job:
 * the job was not stored, or not revived. The message names the index, so the clash cannot pass for a dedupe.
 */
export class UniqueIndexRejectedJobError extends JobsError {
  constructor(
    readonly collectionName: string,
    /** The index the server named, or null when its message named none. */
    readonly indexName: string | null,
    readonly jobName: string,
    options?: { cause?: unknown },
  ) {
    super(
      `Job "${jobName}" cannot be stored: the unique index ${indexName === null ? '(unnamed)' : `"${indexName}"`} on ` +
        `collection "${collectionName}" already holds a job with the same value. This version of the library does ` +
        'not use that index (dedupe keys use "dedupe_scope" and return the live job instead); change the job, or ' +
        'drop or relax that index.',
      options,
    );
  }
}
