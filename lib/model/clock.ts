import { Settings } from 'luxon';

/**
 * Worker-side wall time for what the library writes and compares with stored dates (runAt, claim and lease
 * deadlines in filters, finishedAt…), never the server's ($currentDate/$$NOW are outside the MongoDB subset we rely
 * on). Read through luxon so tests can move it (`Settings.now`) for this and the time-zone math of cron schedules
 * alike. In-process timing (the lease's watchdog and renewal deadlines, shutdown and outcome-write budgets) reads
 * `Date.now` instead, the clock jest's fake timers drive; both are the same system clock in production.
 */
export function now(): Date {
  // Luxon's clock without a DateTime per call: this runs several times per job.
  return new Date(Settings.now());
}

/** Millisecond offsets need no calendar math; plain arithmetic is ~100× cheaper than a luxon round trip per claim. */
export function addMs(date: Date, ms: number): Date {
  return new Date(date.getTime() + ms);
}
