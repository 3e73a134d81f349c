import type { mongo } from 'mongoose';
import { isDocumentUpdateError } from './database-errors.js';

/**
 * A claim write the server refused because of the row it matched (an `$inc` on a string, a `$push` to a non-array,
 * …): the row cannot be taken as stored, and sending the same write again is refused the same way. `error` is the
 * server's own error, for the reason recorded on the row and for rethrowing as it came.
 */
export interface ClaimRefusal {
  readonly kind: 'refused';
  readonly error: mongo.MongoServerError;
}

/** Whether a claim write's outcome is a refusal (a taken row never has a `kind`). */
export function isRefusal<T extends object>(outcome: T | ClaimRefusal | null): outcome is ClaimRefusal {
  return outcome !== null && (outcome as Partial<ClaimRefusal>).kind === 'refused';
}

/** Whether two refusals are the same (same code): a retry on one row refused the same way confirms the row is the cause. */
export function isSameRefusal(a: ClaimRefusal, b: ClaimRefusal): boolean {
  return a.error.code === b.error.code;
}

/** `error` as a refusal of the row a claim write matched (see `isDocumentUpdateError`), else undefined. */
export function asRefusal(error: unknown): ClaimRefusal | undefined {
  return isDocumentUpdateError(error) ? { kind: 'refused', error } : undefined;
}

/** Runs a claim write; the server's refusal of the matched row becomes a `ClaimRefusal`, any other error is thrown. */
export async function refusalAsOutcome<T>(write: () => Promise<T>): Promise<T | ClaimRefusal> {
  try {
    return await write();
  } catch (error) {
    const refusal = asRefusal(error);
    if (!refusal) throw error;
    return refusal;
  }
}
