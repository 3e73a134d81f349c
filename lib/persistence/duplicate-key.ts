import { mongo } from 'mongoose';
import type { GuaranteeIndex } from '../model/errors/guarantee-index.js';
import { CONCURRENCY_SLOT_INDEX, GROUP_SLOT_INDEX } from './guarantee-indexes.js';

/**
 * Reading duplicate-key errors (code 11000): which index refused a write, and on which field. The only place that
 * knows the code and the wordings servers use.
 */

export const DUPLICATE_KEY = 11000;

export function codeOf(error: unknown): unknown {
  return (error as { code?: unknown } | null)?.code;
}

/** A write refused by a unique index (whichever server, whatever its message says). */
export function isDuplicateKey(error: unknown): boolean {
  return codeOf(error) === DUPLICATE_KEY;
}

/** The write errors of a bulk write that failed only on duplicate keys (the other writes landed); else undefined. */
export function duplicateKeyErrorsOnly(
  error: unknown,
): { bulk: mongo.MongoBulkWriteError; writeErrors: mongo.WriteError[] } | undefined {
  if (!(error instanceof mongo.MongoBulkWriteError)) return undefined;
  const writeErrors = [error.writeErrors].flat();
  if (writeErrors.length === 0 || writeErrors.some((e) => e.code !== DUPLICATE_KEY)) return undefined;
  return { bulk: error, writeErrors };
}

/**
 * The index a duplicate-key error names and its key fields: from the driver's `keyPattern` when the server sent one,
 * else from the message: MongoDB words it `... index: <name> dup key: { <field>: ... }`, DocumentDB (Cosmos DB vCore)
 * `Duplicate key violation on the requested collection: Index '<name>'`. Other servers may name nothing at all.
 */
export function clashedIndex(error: unknown): { name?: string; fields?: string[] } {
  const { errmsg, message, keyPattern } = (error ?? {}) as {
    errmsg?: unknown;
    message?: unknown;
    keyPattern?: unknown;
  };
  const text = String(errmsg ?? message ?? '');
  const name = /index: (\S+)/.exec(text)?.[1] ?? /\bIndex '([^']+)'/.exec(text)?.[1];
  if (keyPattern !== null && typeof keyPattern === 'object') return { name, fields: Object.keys(keyPattern) };
  const field = /dup key: \{ ?"?([^":\s]+)"?\s*:/.exec(text)?.[1];
  return { name, fields: field === undefined ? undefined : [field] };
}

/**
 * Whether a duplicate-key error is a clash on a guarantee index (its field, under whatever index name enforces it;
 * else its name): `unknown` when the error names neither, which only a read of the rows can settle.
 */
export function clashOn(error: unknown, index: GuaranteeIndex): 'yes' | 'no' | 'unknown' {
  const { name, fields } = clashedIndex(error);
  if (fields) return fields.length === 1 && fields[0] === index.field ? 'yes' : 'no';
  if (name === undefined) return 'unknown';
  return name === index.name ? 'yes' : 'no';
}

/**
 * A duplicate key on a guarantee index, or one that names no index: for a claim's slot write, where only the slot
 * indexes can refuse it (a claim sets no field an application index would cover), so the claim is simply retried.
 */
export function isClashOn(error: unknown, index: GuaranteeIndex): boolean {
  return clashOn(error, index) !== 'no';
}

/** Another claimer took a fleet-limit slot first (between the read of the holders and this claim's write). */
export function isSlotClash(error: unknown): boolean {
  return isDuplicateKey(error) && (isClashOn(error, CONCURRENCY_SLOT_INDEX) || isClashOn(error, GROUP_SLOT_INDEX));
}
