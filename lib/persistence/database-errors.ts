import { mongo } from 'mongoose';

/** Server error codes that say "not now" (failover, shutdown, network, time limits), not "never". */
const TRANSIENT_CODES = new Set([6, 7, 50, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436, 134]);

/**
 * Whether a failed operation may succeed if sent again: network trouble, no server to select, a primary stepping
 * down. Anything else (a document the server refuses, a command too large to send) fails the same way every time.
 */
export function isTransientDatabaseError(error: unknown): boolean {
  if (error instanceof mongo.MongoNetworkError || error instanceof mongo.MongoServerSelectionError) return true;
  if (error instanceof mongo.MongoTopologyClosedError || error instanceof mongo.MongoNotConnectedError) return true;
  if (!(error instanceof mongo.MongoError)) return false;
  if (error.hasErrorLabel('RetryableWriteError') || error.hasErrorLabel('TransientTransactionError')) return true;
  return typeof error.code === 'number' && TRANSIENT_CODES.has(error.code);
}
