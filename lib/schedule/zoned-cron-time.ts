import { CronTime } from 'cron';
import { DateTime } from 'luxon';
import type { CronSchedule } from '../handlers/cron-schedule.js';

type CronStart = Parameters<CronTime['getNextDateFrom']>[0];

/**
 * The `cron` package's `CronTime` with our next-occurrence math: its own skips or repeats occurrences when clocks
 * change. Plugged into a `CronJob` (whose timer, `nextDate()` and `stop()` apps see through `SchedulerRegistry`),
 * it makes that timer wake at exactly our ticks.
 */
export class ZonedCronTime extends CronTime {
  constructor(private readonly schedule: CronSchedule) {
    super(schedule.expression, schedule.timeZone);
  }

  override getNextDateFrom(start: CronStart): DateTime {
    const from = start instanceof Date ? start : new Date(start.toMillis());
    return DateTime.fromJSDate(this.schedule.nextTick(from), { zone: this.schedule.timeZone });
  }
}
