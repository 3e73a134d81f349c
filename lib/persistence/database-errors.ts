import { mongo } from 'mongoose';
import { isDuplicateKey } from './duplicate-key.js';
import { tookRetryableWrites } from './retryable-write-servers.js';

/**
 * Reading the driver's errors: whether a failed write may land if sent again. Modules outside `persistence/` ask
 * these functions (and `duplicate-key.ts`) and never read an error's code or labels themselves.
 */

/**
 * Server error codes after which the driver reads again (its retryable reads): failover, shutdown, network. A plain
 * `find` command (`PlainCommands`) is not retried by the driver, so it does this once itself.
 */
const RETRYABLE_READ_CODES = new Set([6, 7, 89, 91, 134, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436]);

/** Whether the driver would have sent a read that failed with `error` once more (its retryable reads). */
export function isRetryableReadError(error: unknown): boolean {
  if (error instanceof mongo.MongoNetworkError) return true;
  if (!(error instanceof mongo.MongoServerError)) return false;
  return typeof error.code === 'number' && RETRYABLE_READ_CODES.has(error.code);
}

/** Server error codes that say "not now" (failover, shutdown, network, time limits, write concern), not "never". */
// A literal list (the retryable-read codes plus 50 and 64): the fault checker reads it from this file to pick error
// codes (test/support/server-error-codes.ts).
const TRANSIENT_CODES = new Set([6, 7, 50, 64, 89, 91, 134, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436]);

/**
 * Error codes a server answers for one document's contents (an `$inc` on a string, a `$push` to a non-array, a
 * path through a scalar, a document over 16 MB), as opposed to a network, timeout or server-state error.
 */
const DOCUMENT_UPDATE_ERROR_CODES = new Set([2, 14, 28, 10334, 17419]);

/**
 * Every code known to be about the document a write stores, so that sending the same write again fails the same
 * way: the update family above, a collection validator's refusal (121 DocumentValidationFailure) and an index key
 * too large for a value of the document (17280 KeyTooLong).
 */
const DOCUMENT_ERROR_CODES = new Set([...DOCUMENT_UPDATE_ERROR_CODES, 121, 17280]);

/** Whether the server refused an update because of the document it matched: retrying would fail the same way. */
export function isDocumentUpdateError(error: unknown): error is mongo.MongoServerError {
  return isServerErrorWithCode(error, DOCUMENT_UPDATE_ERROR_CODES);
}

/** Whether `error` is the same refusal as `refusal` (same code): a retry on one row confirms that row is the cause. */
export function isSameRefusal(error: mongo.MongoServerError, refusal: { code?: unknown }): boolean {
  return error.code === refusal.code;
}

/**
 * Whether a write that failed with `error` may have been applied all the same, so that only reading the row back tells:
 * its answer was lost (a network error or a timeout once the command may have been sent), or the server applied it
 * but could not confirm the write concern. An error reply of the server (it answered, refusing the command) and a
 * command never sent (no server to select, on a standalone server) mean nothing was written.
 */
export function mayHaveLanded(error: unknown): boolean {
  if (error instanceof mongo.MongoServerSelectionError) return mayFollowARetryableWrite(error);
  if (error instanceof mongo.MongoNetworkError || error instanceof mongo.MongoOperationTimeoutError) return true;
  // Thrown only by `close()` to commands on connections checked out at that moment: they may have been written.
  if (error instanceof mongo.MongoClientClosedError) return true;
  // A reply the driver could not read is a reply: the command reached the server. The driver also throws one when a
  // retryable write's retry finds a server without retryable writes, after a first attempt that may have landed.
  if (error instanceof mongo.MongoUnexpectedServerResponseError) return true;
  if (error instanceof mongo.MongoWriteConcernError || isBulkWriteConcernError(error)) return true;
  if (error instanceof WriteOutcomeUnknownError) return true;
  return error instanceof mongo.MongoServerError && error.errorResponse?.writeConcernError !== undefined;
}

/**
 * A retryable write (replica set or sharded cluster, `retryWrites` on, the driver's default) whose first attempt
 * failed on the network is sent again after a new server selection; when that selection fails, the driver throws the
 * selection error, not the first attempt's (mongodb 7.8, `executeOperationWithRetries`), so the write may have landed
 * although the error says no server was found. Nothing tells that case from a selection that failed before any attempt,
 * so on such topologies every selection error counts as in doubt: reading a row back costs one read, taking a landed
 * write for one never sent costs an attempt no handler ran. An `Unknown` topology has never selected a server to send a
 * first attempt to. `Single` is a standalone server (no retryable writes) or a `directConnection`, which the driver
 * calls `Single` even to a replica-set primary: there the server's description is `Unknown` by the time selection
 * fails, so what it was before decides (`tookRetryableWrites`, learnt from the client's monitoring).
 */
function mayFollowARetryableWrite(error: mongo.MongoServerSelectionError): boolean {
  const reason = error.reason as { type?: unknown; servers?: ReadonlyMap<string, unknown> } | undefined;
  const type = reason?.type;
  if (type === mongo.TopologyType.Single) return tookRetryableWrites(reason?.servers?.keys() ?? []);
  return type !== undefined && type !== mongo.TopologyType.Unknown;
}

/**
 * A bulk write whose reply carried a write concern error (e.g. a `wtimeout`): applied, at least on the primary, but
 * not confirmed. The driver throws it as a `MongoBulkWriteError` with the write concern error only in its `result`
 * (a lone write throws a `MongoWriteConcernError` instead).
 */
export function isBulkWriteConcernError(error: unknown): boolean {
  if (!(error instanceof mongo.MongoBulkWriteError)) return false;
  const result = error.result as { getWriteConcernError?: () => unknown } | undefined;
  return result?.getWriteConcernError?.() != null;
}

/**
 * A statement of a batched `update` refused in the reply's `writeErrors`, as its caller should take it: a mongod
 * refuses a statement for its row only, but a mongos also answers a shard's failure (a failover, a stale routing
 * table) statement by statement, after that shard may have applied it. A refusal that is neither about the document
 * (`isPermanentWriteError`) nor a unique index's (11000) is therefore a `PartlyAppliedWriteError`: maybe applied.
 */
export function statementRefusal(error: mongo.MongoServerError): mongo.MongoServerError | PartlyAppliedWriteError {
  if (isPermanentWriteError(error) || isDuplicateKey(error)) return error;
  return new PartlyAppliedWriteError(error, 'A batched statement was refused for a reason not about its row');
}

/**
 * How a failed write may go if sent again:
 * - `permanent`: it is known to fail the same way (see {@link isPermanentWriteError}); do not send it again;
 * - `transient`: known to say "not now" (network, no server to select, failover and shutdown codes, the driver's
 *   retryable labels); send it again while the lease is live;
 * - `unknown`: anything else, including every server error whose code is in neither list (11601 Interrupted, a code
 *   a newer server added, a reply without a code); sent again for a bounded time, then left to the lease.
 */
export type WriteErrorKind = 'transient' | 'permanent' | 'unknown';

export function classifyWriteError(error: unknown): WriteErrorKind {
  if (isPermanentWriteError(error)) return 'permanent';
  if (error instanceof PartlyAppliedWriteError)
    return classifyWriteError(error.cause) === 'transient' ? 'transient' : 'unknown';
  if (error instanceof WriteOutcomeUnknownError) return 'transient';
  if (error instanceof mongo.MongoNetworkError || error instanceof mongo.MongoServerSelectionError) return 'transient';
  if (error instanceof mongo.MongoTopologyClosedError || error instanceof mongo.MongoNotConnectedError)
    return 'transient';
  if (error instanceof mongo.MongoServerError) {
    if (hasRetryableLabel(error)) return 'transient';
    if (typeof error.code === 'number' && TRANSIENT_CODES.has(error.code)) return 'transient';
  }
  return 'unknown';
}

/**
 * Whether a write failed for good, because of the document it writes: the server refused it with a code known to be
 * about that document (see `DOCUMENT_ERROR_CODES`) and no retryable label, or the driver could not even send it (a
 * command over the BSON size limit, a value it cannot serialize, an invalid argument). A server error is never
 * permanent for being unfamiliar: only what is known to be about this document is.
 */
export function isPermanentWriteError(error: unknown): boolean {
  if (error instanceof mongo.MongoServerError) return isServerErrorWithCode(error, DOCUMENT_ERROR_CODES);
  return (
    error instanceof mongo.MongoInvalidArgumentError ||
    error instanceof mongo.BSON.BSONError ||
    error instanceof RangeError // the BSON serializer's buffer overflow for a command over the size limit
  );
}

function isServerErrorWithCode(error: unknown, codes: ReadonlySet<number>): error is mongo.MongoServerError {
  return (
    error instanceof mongo.MongoServerError &&
    typeof error.code === 'number' &&
    codes.has(error.code) &&
    !hasRetryableLabel(error)
  );
}

function hasRetryableLabel(error: mongo.MongoServerError): boolean {
  return error.hasErrorLabel('RetryableWriteError') || error.hasErrorLabel('TransientTransactionError');
}

/**
 * Whether `error` is this process's own client being closed (or never connected): transient to a write in flight, but
 * nothing that waiting fixes at bootstrap, where the application is going down.
 */
export function isClientClosed(error: unknown): boolean {
  return error instanceof mongo.MongoTopologyClosedError || error instanceof mongo.MongoNotConnectedError;
}

/**
 * A batched write whose command was answered but whose effect on this row is unknown: the read that tells which of
 * its updates matched failed. It may have landed (`mayHaveLanded`), and sending it again is safe (`transient`): the
 * writes are owner-fenced, and a later miss is checked against the row.
 */
export class WriteOutcomeUnknownError extends Error {
  constructor(
    override readonly cause: unknown,
    what = 'A batched write was answered, but reading which of its updates matched failed',
  ) {
    super(`${what}: ${String(cause)}`);
  }

  override get name(): string {
    return 'WriteOutcomeUnknownError';
  }
}

/**
 * A batched write that failed after some of its statements may have been applied: a multi-statement `update` is not
 * all or nothing (a failover or a killed operation between two statements fails the command, `ok: 0`, and keeps those
 * before), and a call split into several commands may fail after the first. It may have landed (`mayHaveLanded`); sent
 * again, it fails or not as its cause says, except that a cause "about the document" is not final here (it answered
 * the whole command, not one row): `transient` when the cause is, else `unknown` (retried for a bounded time).
 */
export class PartlyAppliedWriteError extends WriteOutcomeUnknownError {
  override get name(): string {
    return 'PartlyAppliedWriteError';
  }
}
