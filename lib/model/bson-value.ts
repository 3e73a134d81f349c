import { mongo } from 'mongoose';

/** The getter every value of the bson library has, answering its major version. */
const BSON_VERSION = Symbol.for('@@mdb.bson.version');
/** The major version of the bson library the driver serializes with: values of any other one are refused by it. */
const DRIVER_BSON_MAJOR: unknown = (new mongo.BSON.ObjectId() as unknown as Record<symbol, unknown>)[BSON_VERSION];

/**
 * What an object tagged with `_bsontype` (the key by which the driver's serializer recognises its own values) is:
 * - `bson`: a value of the bson library the driver writes (the same major version, from any copy of the package:
 *   mongoose's, the `mongodb` or `bson` package's), with its type (`ObjectId`, `Decimal128`, …);
 * - `look-alike`: anything else with the key, with why it cannot be stored: a plain object (an upstream API's answer
 *   passed through) or a value of another major version of the library. The serializer throws on either
 *   (`BSONVersionError`), so such a value must be refused before any write.
 * Undefined when the object has no `_bsontype` key, or a null or undefined one: ordinary data.
 */
export type BsonTag = { kind: 'bson'; type: string } | { kind: 'look-alike'; problem: string };

export function bsonTagOf(value: object): BsonTag | undefined {
  if (!('_bsontype' in value)) return undefined;
  const tag = (value as { _bsontype?: unknown })._bsontype;
  // The serializer writes an object whose tag is null or undefined as a plain sub-document: that one is data.
  if (tag === null || tag === undefined) return undefined;
  const prototype = Object.getPrototypeOf(value);
  if (prototype === Object.prototype || prototype === null) {
    return {
      kind: 'look-alike',
      problem:
        `has a "_bsontype" key (${describeTag(tag)}), which the bson library reserves for its own values: a plain ` +
        'object with it cannot be stored; rename the key or convert the value',
    };
  }
  const version = (value as Record<symbol, unknown>)[BSON_VERSION];
  if (typeof tag === 'string' && version === DRIVER_BSON_MAJOR) return { kind: 'bson', type: tag };
  return {
    kind: 'look-alike',
    problem:
      `is a BSON ${describeTag(tag)} value from another version of the bson library (${String(version)}; the ` +
      `driver writes version ${String(DRIVER_BSON_MAJOR)}), which cannot be stored`,
  };
}

function describeTag(tag: unknown): string {
  return typeof tag === 'string' ? JSON.stringify(tag.slice(0, 40)) : typeof tag;
}
