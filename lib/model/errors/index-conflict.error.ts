import type { GuaranteeIndex, IndexProblem } from './guarantee-index.js';
import { JobsError } from './jobs.error.js';

/**
 * Bootstrap found that an index an exactly-once promise depends on (dedupe keys, cron ticks) is missing, or that
 * another index stands in its way. Nothing starts until it is fixed; the message names the index and the fix.
 */
export class IndexConflictError extends JobsError {
  /** The index the library needs. */
  readonly indexName: string;
  /** The index in the way, or null when the needed one is missing. */
  readonly conflictingIndex: string | null;
  readonly problem: string;

  constructor(
    readonly collectionName: string,
    guarantee: GuaranteeIndex,
    found: IndexProblem,
    options?: { cause?: unknown },
  ) {
    const needed = `"${guarantee.name}" ({ ${guarantee.field}: 1 }, unique, sparse), which enforces ${guarantee.guards}`;
    const cause = options?.cause instanceof Error ? ` (${options.cause.message})` : '';
    super(
      found.conflictingIndex === null
        ? `Index ${needed}, is missing on collection "${collectionName}" and could not be created${cause}. ` +
            'Fix what stops it and restart.'
        : `Index "${found.conflictingIndex}" on collection "${collectionName}" ${found.problem}, so index ${needed}, ` +
            `is not in force. Drop it with db.getCollection('${collectionName}').dropIndex('${found.conflictingIndex}') ` +
            `and restart: the library then creates "${guarantee.name}" itself.`,
      options,
    );
    this.indexName = guarantee.name;
    this.conflictingIndex = found.conflictingIndex;
    this.problem = found.problem;
  }
}
