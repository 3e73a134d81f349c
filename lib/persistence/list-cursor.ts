import { mongo } from 'mongoose';
import { InvalidCursorError } from '../model/errors/invalid-cursor.error.js';

/** Longer than any cursor `list` hands out (a 1 KB string `_id` is already an odd row); bounds the parse. */
const MAX_CURSOR_LENGTH = 4_096;
const BASE64URL = /^[A-Za-z0-9_-]+$/;

/**
 * BSON's comparison order of the types an `_id` can have, lowest first (arrays and regexes cannot be ids). MongoDB
 * sorts `_id` across types in this order, but `$lt` only compares within one type, so the page after an id of one
 * type also takes every id of the types below it.
 */
const TYPE_BRACKETS: readonly (readonly string[])[] = [
  ['minKey'],
  ['null'],
  ['double', 'int', 'long', 'decimal'],
  // 'symbol' (deprecated, never an id in practice) is left out: not every server knows the alias.
  ['string'],
  ['object'],
  ['binData'],
  ['objectId'],
  ['bool'],
  ['date'],
  ['timestamp'],
  ['maxKey'],
];

const BRACKET_BY_BSONTYPE: Readonly<Record<string, number>> = {
  MinKey: 0,
  Int32: 2,
  Double: 2,
  Long: 2,
  Decimal128: 2,
  Binary: 5,
  ObjectId: 6,
  Timestamp: 9,
  MaxKey: 10,
};

/**
 * The opaque cursor for the page after the row with this `_id`: the id as canonical Extended JSON (so an ObjectId,
 * a string and a number stay distinct), base64url-encoded.
 */
export function encodeListCursor(lastId: unknown): string {
  return Buffer.from(mongo.BSON.EJSON.stringify({ id: lastId }, { relaxed: false })).toString('base64url');
}

/** The `_id` a cursor from `encodeListCursor` carries. @throws InvalidCursorError for anything else. */
export function decodeListCursor(cursor: unknown): unknown {
  if (
    typeof cursor !== 'string' ||
    cursor.length === 0 ||
    cursor.length > MAX_CURSOR_LENGTH ||
    !BASE64URL.test(cursor)
  ) {
    throw new InvalidCursorError(cursor, `expected a base64url string of at most ${MAX_CURSOR_LENGTH} characters`);
  }
  let parsed: unknown;
  try {
    parsed = mongo.BSON.EJSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'), { relaxed: false });
  } catch {
    throw new InvalidCursorError(cursor, 'it does not decode');
  }
  const id = (parsed as { id?: unknown } | null)?.id;
  if (typeof parsed !== 'object' || parsed === null || Object.keys(parsed).length !== 1 || id === undefined) {
    throw new InvalidCursorError(cursor, 'it does not carry a job id');
  }
  if (bracketOf(id) === undefined || !operatorFree(id)) {
    throw new InvalidCursorError(cursor, 'it does not carry a value a job id can have');
  }
  return id;
}

/**
 * Rows after `lastId` in descending `_id` order: smaller ids of its type, and every id of a type BSON orders below.
 */
export function idsBefore(lastId: unknown): Record<string, unknown> {
  const bracket = bracketOf(lastId) ?? 0;
  const lowerTypes = TYPE_BRACKETS.slice(0, bracket).flat();
  const smaller = { _id: { $lt: lastId } };
  return lowerTypes.length === 0 ? smaller : { $or: [smaller, { _id: { $type: lowerTypes } }] };
}

/** Index in TYPE_BRACKETS of a decoded value's BSON type; undefined for values an `_id` cannot be. */
function bracketOf(value: unknown): number | undefined {
  if (value === null) return 1;
  if (typeof value === 'number') return 2;
  if (typeof value === 'string') return 3;
  if (typeof value === 'boolean') return 7;
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? undefined : 8;
  if (typeof value !== 'object' || Array.isArray(value)) return undefined;
  const prototype = Object.getPrototypeOf(value);
  // A plain object is a sub-document even with a `_bsontype` key: only EJSON's own instances are BSON values (the
  // driver refuses to serialize an imitation).
  if (prototype === Object.prototype || prototype === null) return '_bsontype' in value ? undefined : 4;
  const bsontype = (value as { _bsontype?: unknown })._bsontype;
  return typeof bsontype === 'string' ? BRACKET_BY_BSONTYPE[bsontype] : undefined;
}

/**
 * No `$`-prefixed key (nor a `_bsontype` imitation) anywhere in a plain object or array: the value is compared, never
 * read as an operator.
 */
function operatorFree(value: unknown): boolean {
  if (typeof value !== 'object' || value === null || value instanceof Date) return true;
  const prototype = Object.getPrototypeOf(value);
  if (prototype !== Object.prototype && prototype !== null && !Array.isArray(value)) return true;
  return Object.entries(value).every(
    ([key, child]) => !key.startsWith('$') && key !== '_bsontype' && operatorFree(child),
  );
}
