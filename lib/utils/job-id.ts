import { Types } from 'mongoose';

const OBJECT_ID_HEX = /^[0-9a-fA-F]{24}$/;

/** A job id from user input, or null. Only 24-hex strings pass, so objects like `{ $ne: null }` never reach a query. */
export function parseJobId(id: unknown): Types.ObjectId | null {
  return typeof id === 'string' && OBJECT_ID_HEX.test(id) ? new Types.ObjectId(id) : null;
}
