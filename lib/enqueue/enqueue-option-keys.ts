import type { EnqueueItem, EnqueueManyOptions, EnqueueOptions } from '../model/jobs.types.js';

/** Every key of `EnqueueOptions`: typed as a record, so a new option that is not listed here fails to compile. */
const ENQUEUE_OPTIONS: Record<keyof EnqueueOptions, true> = {
  runAt: true,
  delayMs: true,
  priority: true,
  maxAttempts: true,
  dedupeKey: true,
  throttle: true,
  debounce: true,
  group: true,
  strict: true,
  session: true,
};

const ENQUEUE_MANY_OPTIONS: Record<keyof EnqueueManyOptions, true> = { session: true };

const ENQUEUE_ITEM: Record<keyof EnqueueItem, true> = { name: true, payload: true, options: true };

/** The keys `enqueue` (and an `enqueueMany` item's `options`, but for `session`) accepts. */
export const ENQUEUE_OPTION_KEYS: readonly string[] = Object.keys(ENQUEUE_OPTIONS);

/** The keys of `enqueueMany`'s second argument. */
export const ENQUEUE_MANY_OPTION_KEYS: readonly string[] = Object.keys(ENQUEUE_MANY_OPTIONS);

/** The keys of one `enqueueMany` item. */
export const ENQUEUE_ITEM_KEYS: readonly string[] = Object.keys(ENQUEUE_ITEM);
