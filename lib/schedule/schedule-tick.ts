import { CronTime } from 'cron';

/**
 * The tick instant a cron timer firing at `firedAt` stands for: the latest scheduled instant not after `firedAt`,
 * starting from `expected` (the tick we were waiting for). A timer that fires late still means its own tick; one
 * that slept through several ticks means the latest of them, never an instant in the future.
 */
export function tickFor(cronTime: CronTime, expected: Date, firedAt: Date): Date {
  let tick = expected;
  for (;;) {
    const next = nextTick(cronTime, tick);
    if (next.getTime() > firedAt.getTime()) return tick;
    tick = next;
  }
}

/** The first scheduled instant strictly after `after`, reading the expression in the schedule's time zone. */
export function nextTick(cronTime: CronTime, after: Date): Date {
  // getNextDateFrom ignores the zone given to the constructor unless it is passed again.
  return cronTime.getNextDateFrom(after, cronTime.timeZone).toJSDate();
}
