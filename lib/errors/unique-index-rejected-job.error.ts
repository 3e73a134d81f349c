import { JobsError } from './jobs.error';

/**
 * A unique index that is not one of the library's (the application's own) rejected a job: the job was not stored, or
 * not revived. The message names the index, so the clash can be told apart from dedupe, which never throws.
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
        `collection "${collectionName}" already holds a job with the same value. It is not an index of this library ` +
        '(dedupe keys use "dedupe_scope" and return the live job instead); change the job, or drop or relax that index.',
      options,
    );
  }
}
