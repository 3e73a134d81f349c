import type { ClientSession } from 'mongoose';
import { describeValue } from '../model/errors/describe-value.js';
import { InvalidSessionError } from '../model/errors/invalid-session.error.js';

/**
 * The `session` option of an enqueue, checked before anything is written: undefined, or a live `ClientSession` that
 * `ownsSession` accepts (one of the jobs connection's client; a session cannot carry another client's writes).
 * @throws InvalidSessionError
 */
export function requireEnqueueSession(
  value: unknown,
  ownsSession: (session: ClientSession) => boolean,
): ClientSession | undefined {
  if (value === undefined) return undefined;
  if (!looksLikeSession(value)) {
    throw new InvalidSessionError(
      `${describeValue(value)} is not a MongoDB ClientSession (start one with connection.startSession() or ` +
        'connection.transaction(), on the connection JobsModule uses)',
    );
  }
  if (!ownsSession(value)) {
    throw new InvalidSessionError(
      'it was started on another MongoClient than the jobs connection (start it from the connection JobsModule uses)',
    );
  }
  if (value.hasEnded) throw new InvalidSessionError('it has ended (endSession() was called)');
  return value;
}

/**
 * By shape, not `instanceof`: mongoose often brings its own copy of the driver, whose class differs from the app's
 * `mongodb` import. Whose client the session belongs to is checked by identity right after.
 */
function looksLikeSession(value: unknown): value is ClientSession {
  if (value === null || typeof value !== 'object') return false;
  const session = value as Record<string, unknown>;
  return (
    typeof session.hasEnded === 'boolean' &&
    ['inTransaction', 'startTransaction', 'commitTransaction', 'abortTransaction', 'endSession', 'on'].every(
      (method) => typeof session[method] === 'function',
    )
  );
}
