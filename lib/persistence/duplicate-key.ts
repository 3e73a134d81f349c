import { mongo } from 'mongoose';
import type { GuaranteeIndex } from './guarantee-indexes';

/** Reading MongoDB's duplicate-key errors (code 11000): which index refused a write, and on which field. */

export const DUPLICATE_KEY = 11000;

export function codeOf(error: unknown): unknown {
  return (error as { code?: unknown } | null)?.code;
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
 * else from the message, which every supported server words `... index: <name> dup key: { <field>: ... }`.
 */
export function clashedIndex(error: unknown): { name?: string; fields?: string[] } {
  const { errmsg, message, keyPattern } = (error ?? {}) as {
    errmsg?: unknown;
    message?: unknown;
    keyPattern?: unknown;
  };
  const text = String(errmsg ?? message ?? '');
  const name = /index: (\S+)/.exec(text)?.[1];
  if (keyPattern !== null && typeof keyPattern === 'object') return { name, fields: Object.keys(keyPattern) };
  const field = /dup key: \{ ?"?([^":\s]+)"?\s*:/.exec(text)?.[1];
  return { name, fields: field === undefined ? undefined : [field] };
}

/**
 * A duplicate key on a guarantee index's field, under whatever index name enforces it. A message we cannot read
 * counts as one: for the dedupe scope, the bounded tries of insertDeduped then end in DedupeKeyContendedError.
 */
export function isClashOn(error: unknown, index: GuaranteeIndex): boolean {
  const { name, fields } = clashedIndex(error);
  if (fields) return fields.length === 1 && fields[0] === index.field;
  return name === undefined || name === index.name;
}
