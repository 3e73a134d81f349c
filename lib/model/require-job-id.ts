import type { Types } from 'mongoose';
import { InvalidJobIdError } from './errors/invalid-job-id.error.js';
import { parseJobId } from './job-id.js';

/** A job id from user input as an ObjectId. @throws InvalidJobIdError for anything but a 24-hex string. */
export function requireJobId(id: unknown): Types.ObjectId {
  const parsed = parseJobId(id);
  if (!parsed) throw new InvalidJobIdError(id);
  return parsed;
}
