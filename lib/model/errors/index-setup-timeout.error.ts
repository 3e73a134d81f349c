import { JobsError } from './jobs.error.js';

/**
 * Creating or checking the jobs collection's indexes at bootstrap did not finish in time (no answer, or transient
 * errors until the end: the last one is the `cause`); bootstrap fails.
 */
export class IndexSetupTimeoutError extends JobsError {
  constructor(
    readonly collectionName: string,
    readonly timeoutMs: number,
    options?: { cause?: unknown },
  ) {
    super(
      `Setting up the indexes of collection "${collectionName}" did not finish within ${timeoutMs} ms. ` +
        'Check that the database answers; when a large collection needs longer to build an index, raise ' +
        'the indexSetupTimeoutMs option (a build the server has started keeps running and is reused on restart).',
      options,
    );
  }
}
