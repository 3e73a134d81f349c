import { mongo } from 'mongoose';

/** Server error codes that say "not now" (failover, shutdown, network, time limits, write concern), not "never". */
const TRANSIENT_CODES = new Set([6, 7, 50, 64, 89, 91, 134, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436]);

/**
 * Error codes a server answers for one document's contents (an `$inc` on a string, a `$push` to a non-array, a
 * path through a scalar, a document over 16 MB), as opposed to a network, timeout or server-state error.
 */
const DOCUMENT_UPDATE_ERROR_CODES = new Set([2, 14, 28, 10334, 17419]);

/** Whether the server refused an update because of the document it matched: retrying would fail the same way. */
export function isDocumentUpdateError(error: unknown): error is mongo.MongoServerError {
  return (
    error instanceof mongo.MongoServerError &&
    typeof error.code === 'number' &&
    DOCUMENT_UPDATE_ERROR_CODES.has(error.code) &&
    !error.hasErrorLabel('RetryableWriteError')
  );
}

/** How a failed write may go if sent again. */
export type WriteErrorKind = 'transient' | 'permanent' | 'unknown';

/** `transient`: network, server selection, failover codes; `permanent`: see {@link isPermanentWriteError}. */
export function classifyWriteError(error: unknown): WriteErrorKind {
  if (isPermanentWriteError(error)) return 'permanent';
  if (error instanceof mongo.MongoNetworkError || error instanceof mongo.MongoServerSelectionError) return 'transient';
  if (error instanceof mongo.MongoTopologyClosedError || error instanceof mongo.MongoNotConnectedError)
    return 'transient';
  return error instanceof mongo.MongoServerError ? 'transient' : 'unknown';
}

/**
 * Whether a write failed for good: the server refused it with a non-transient error, or the driver could not even
 * send it (a command over the BSON size limit, an invalid argument). Anything else (network trouble, no server to
 * select, a primary stepping down, an error of unknown kind) may succeed if sent again.
 */
export function isPermanentWriteError(error: unknown): boolean {
  if (error instanceof mongo.MongoServerError) {
    if (error.hasErrorLabel('RetryableWriteError') || error.hasErrorLabel('TransientTransactionError')) return false;
    return !(typeof error.code === 'number' && TRANSIENT_CODES.has(error.code));
  }
  return (
    error instanceof mongo.MongoInvalidArgumentError ||
    error instanceof mongo.BSON.BSONError ||
    error instanceof RangeError // the BSON serializer's buffer overflow for a command over the size limit
  );
}
