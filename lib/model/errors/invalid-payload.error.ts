import { JobsError } from './jobs.error.js';

/** A payload that MongoDB cannot store as plain data; nothing was written. */
export class InvalidPayloadError extends JobsError {
  constructor(
    readonly path: string,
    readonly problem: string,
  ) {
    super(`Job payload cannot be stored: ${path === '' ? 'the payload' : `payload.${path}`} ${problem}`);
  }
}
