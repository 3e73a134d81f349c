import { DAY_MS, HOUR_MS } from './time-units.js';

/**
 * How late a cron tick may still be enqueued. A timer that fires later than this (a process or VM suspended for a
 * day, a clock set back by hand) skips the tick and logs it: a run that long overdue is rarely still wanted (a daily
 * report would overlap the next one), and the bound is what lets finished tick rows be deleted at all — a tick's row
 * is what makes it exactly-once, so it must outlive every instance that could still enqueue the tick. A constant,
 * not one schedule period: a monthly cron would then keep its rows a month past retention, and a per-second cron
 * would skip a tick after a one-second stall.
 */
export const CRON_CATCH_UP_WINDOW_MS = DAY_MS;

/**
 * How long a tick's row is kept past its tick, whatever retention says: the window plus an hour, so an instance
 * whose clock is behind the sweeping one's (by anything under an hour) cannot enqueue a tick whose row is gone.
 */
export const CRON_TICK_KEEP_MS = CRON_CATCH_UP_WINDOW_MS + HOUR_MS;

/** True when `tick` is too old to enqueue at `at`. */
export function isPastCatchUpWindow(tick: Date, at: Date): boolean {
  return at.getTime() - tick.getTime() > CRON_CATCH_UP_WINDOW_MS;
}
