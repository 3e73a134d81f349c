import { truncate } from './error-info.js';
import { InvalidOptionError } from './errors/invalid-option.error.js';

/** One line a handler logged with `ctx.log` (`JobRecord.logs`). */
export interface JobLogLine {
  /** When the handler logged it (the worker's clock). */
  at: Date;
  /** The attempt that logged it (1-based). */
  attempt: number;
  /** The message; one longer than MAX_LOG_LINE_BYTES of UTF-8 is cut, ending with a `[truncated, …]` marker. */
  message: string;
}

/** Lines a job keeps, across all its attempts: the oldest are dropped beyond this. */
export const MAX_LOG_LINES = 200;

/** Longest line kept, in UTF-8 bytes. 200 × 500 B keeps a job's log far from the 16 MB document limit. */
export const MAX_LOG_LINE_BYTES = 500;

/**
 * Room a job's log may take on its row, in BSON: every line at its longest, plus its time, attempt and keys. A result
 * is only stored if the row has this room left (the completion write may carry lines).
 */
export const MAX_LOG_BYTES = MAX_LOG_LINES * (MAX_LOG_LINE_BYTES + 100);

/** Lines logged and not written yet; `count` also counts those dropped before they could be (the oldest first). */
export interface LogBatch {
  lines: JobLogLine[];
  count: number;
}

/**
 * The line `ctx.log(message)` stores, for the worker's context and the testing kit's alike: a string only, cut at
 * MAX_LOG_LINE_BYTES of UTF-8.
 * @throws InvalidOptionError for a message that is not a string.
 */
export function logLine(message: unknown, attempt: number, at: Date): JobLogLine {
  if (typeof message !== 'string') throw new InvalidOptionError('message', message, 'must be a string');
  return { at, attempt, message: truncate(message, MAX_LOG_LINE_BYTES) };
}
