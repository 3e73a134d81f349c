import { DateTime } from 'luxon';

/**
 * Worker-side time. Every timestamp the library writes comes from here, never from the server
 * ($currentDate/$$NOW are outside the MongoDB subset we rely on). Reading it through luxon keeps one clock
 * source (`Settings.now`) for this and the time-zone math of cron schedules.
 */
export function now(): Date {
  return DateTime.now().toJSDate();
}

/** Millisecond offsets need no calendar math; plain arithmetic is ~100× cheaper than a luxon round trip per claim. */
export function addMs(date: Date, ms: number): Date {
  return new Date(date.getTime() + ms);
}
