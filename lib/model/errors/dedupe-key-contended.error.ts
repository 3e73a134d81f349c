import { JobsError } from './jobs.error.js';

/**
 * `enqueue`/`enqueueMany` with a dedupe key found it held, then free, again and again: each time it looked, the holder
 * had finished, and each time it inserted, another job had taken the key. That job was not stored (an `enqueueMany`
 * may have stored its other items); enqueue it again. Also thrown for a `throttle` or `debounce` key (`option` says
 * which) whose every take lost a race with another enqueue of it.
 */
export class DedupeKeyContendedError extends JobsError {
  constructor(
    readonly jobName: string,
    readonly dedupeKey: string,
    readonly tries: number,
    options?: { cause?: unknown },
    readonly option: 'dedupeKey' | 'throttle.key' | 'debounce.key' = 'dedupeKey',
  ) {
    super(
      `Could not enqueue job "${jobName}" with ${option} "${dedupeKey}": in ${tries} tries the key changed hands ` +
        'between each insert and each look-up of its holder (jobs with this key finish as fast as they are ' +
        'enqueued). This job was not stored; enqueue it again.',
      options,
    );
  }
}
