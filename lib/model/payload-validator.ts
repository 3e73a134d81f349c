import { isUint8Array } from 'node:util/types';
import { mongo } from 'mongoose';
import { bsonTagOf } from './bson-value.js';
import { InvalidPayloadError } from './errors/invalid-payload.error.js';
import { MAX_PAYLOAD_BYTES } from './jobs.constants.js';

const MAX_DEPTH = 90;

/**
 * Accepts plain data MongoDB stores and gives back (through the payload codec) as it was: JSON-like values (-0
 * included), Dates, Buffers, Uint8Arrays (read back as Buffers) and ObjectIds. Rejects, naming the path, what would
 * be lost or refused: functions, symbols, bigints, class instances (Map, Set, other typed arrays, …), circular
 * references, `$`-prefixed or dotted keys, invalid Dates, objects with a `_bsontype` key that are not the driver's
 * own BSON values (the serializer would throw on them), and payloads over the document size limit. What changes
 * silently is documented in docs/enqueueing.md (undefined, symbol and non-enumerable keys, Uint8Array → Buffer).
 */
export function assertStorablePayload(payload: unknown): void {
  assertStorableValue(payload, (path, problem) => new InvalidPayloadError(path, problem));
  const bytes = mongo.BSON.calculateObjectSize({ payload: payload ?? null }, { ignoreUndefined: true });
  if (bytes > MAX_PAYLOAD_BYTES) {
    throw new InvalidPayloadError('', `is ${bytes} bytes as BSON, over the limit of ${MAX_PAYLOAD_BYTES}`);
  }
}

/** Builds the error for a value that cannot be stored: the path inside it (`''` for the value itself), and why. */
export type UnstorableValueError = (path: string, problem: string) => Error;

/**
 * The payload rules (all but the size limit) for any value the library stores for a user (payload, result,
 * progress): throws `fail(path, problem)` for the first part that MongoDB would refuse or not give back as it was.
 * Deep (every level, arrays included), cycle-safe (a circular reference is refused) and bounded (at most
 * `MAX_DEPTH` levels), so nothing the driver would throw on at serialization time reaches a write.
 */
export function assertStorableValue(value: unknown, fail: UnstorableValueError): void {
  visit(value, '', new Set(), 0, fail);
}

function visit(value: unknown, path: string, ancestors: Set<object>, depth: number, fail: UnstorableValueError): void {
  switch (typeof value) {
    case 'string':
    case 'number':
    case 'boolean':
    case 'undefined':
      return;
    case 'function':
      throw fail(path, 'is a function, which cannot be stored');
    case 'symbol':
      throw fail(path, 'is a symbol, which cannot be stored');
    case 'bigint':
      throw fail(path, 'is a bigint; store it as a string or number');
  }
  if (value === null) return;
  const object = value as object;
  if (object instanceof Date) {
    if (Number.isNaN(object.getTime())) throw fail(path, 'is an invalid Date');
    return;
  }
  if (isUint8Array(object)) return;
  const bson = bsonTagOf(object);
  if (bson?.kind === 'look-alike') throw fail(path, bson.problem);
  if (bson?.type === 'ObjectId') return;
  if (depth > MAX_DEPTH) throw fail(path, `nests deeper than ${MAX_DEPTH} levels`);
  if (ancestors.has(object)) throw fail(path, 'is a circular reference');
  const prototype = Object.getPrototypeOf(object);
  const isArray = Array.isArray(object);
  if (!isArray && prototype !== Object.prototype && prototype !== null) {
    const kind = prototype?.constructor?.name ?? 'unknown';
    const hint = ArrayBuffer.isView(object)
      ? 'store its bytes as a Buffer or Uint8Array'
      : 'use plain objects and arrays';
    throw fail(path, `is a ${kind} instance; ${hint}`);
  }
  ancestors.add(object);
  for (const [key, child] of Object.entries(object)) {
    if (!isArray && (key.startsWith('$') || key.includes('.') || key.includes('\0'))) {
      throw fail(join(path, key), 'has a key starting with "$" or containing "." or NUL');
    }
    visit(child, join(path, key), ancestors, depth + 1, fail);
  }
  ancestors.delete(object);
}

function join(path: string, key: string): string {
  return path === '' ? key : `${path}.${key}`;
}
