import { mongo } from 'mongoose';
import { isBulkWriteConcernError } from './database-errors.js';

/** How a batched write (one unordered `bulkWrite` of single-row updates) fails, told apart as single writes fail. */

/**
 * The per-op write errors of a bulk write that failed only op by op, each as the `MongoServerError` a single-document
 * write would have rejected with; undefined when the command itself failed (no write errors, or a write concern
 * error, which says nothing about which op it hit and may follow writes that landed: `mayHaveLanded` says so).
 */
export function refusedWrites(error: unknown): Map<number, mongo.MongoServerError> | undefined {
  if (!(error instanceof mongo.MongoBulkWriteError) || isBulkWriteConcernError(error)) return undefined;
  const writeErrors = [error.writeErrors].flat();
  if (writeErrors.length === 0) return undefined;
  return new Map(
    writeErrors.map((writeError) => [
      writeError.index,
      new mongo.MongoServerError({
        message: writeError.errmsg ?? 'write refused',
        code: writeError.code,
        errInfo: writeError.errInfo,
      }),
    ]),
  );
}

/**
 * The error a failed bulk command rejects with as a single write would have: the driver wraps a network or timeout
 * error of `bulkWrite` in a `MongoBulkWriteError` (keeping the original as its `errorResponse`); unwrapped, a batched
 * renewal fails with the same `MongoNetworkError` as `renewLease`.
 */
export function commandError(error: unknown): unknown {
  if (!(error instanceof mongo.MongoBulkWriteError) || [error.writeErrors].flat().length > 0) return error;
  return error.errorResponse instanceof Error ? error.errorResponse : error;
}
