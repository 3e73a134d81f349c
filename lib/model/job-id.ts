import { Types } from 'mongoose';

const OBJECT_ID_HEX = /^[0-9a-fA-F]{24}$/;

/** A job id from user input, or null. Only 24-hex strings pass, so objects like `{ $ne: null }` never reach a query. */
export function parseJobId(id: unknown): Types.ObjectId | null {
  return typeof id === 'string' && OBJECT_ID_HEX.test(id) ? new Types.ObjectId(id) : null;
}

/** A readable id for any `_id` a row may have (hex for an ObjectId); never throws. */
export function describeJobId(id: unknown): string {
  if (isObjectId(id)) return id.toHexString();
  try {
    return typeof id === 'string' ? id : (JSON.stringify(id) ?? String(id));
  } catch {
    return Object.prototype.toString.call(id);
  }
}

/** Any ObjectId (mongoose's, the driver's or another bson copy's), told by its tag rather than by `instanceof`. */
export function isObjectId(value: unknown): value is { toHexString(): string } {
  return (
    typeof value === 'object' &&
    value !== null &&
    (value as { _bsontype?: unknown })._bsontype === 'ObjectId' &&
    typeof (value as { toHexString?: unknown }).toHexString === 'function'
  );
}
