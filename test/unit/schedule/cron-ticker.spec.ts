import { describe, expect, it } from '@jest/globals';
import { CronSchedule } from '../../../lib/handlers/cron-schedule';
import { CronTicker } from '../../../lib/schedule/cron-ticker';

const t = (iso: string) => new Date(iso);

describe('CronTicker', () => {
  const everyFiveMinutes = new CronSchedule('*/5 * * * *', 'Europe/Berlin');

  it('stands for the expected tick when the timer fires on time, a little late or a little early', () => {
    const ticker = new CronTicker(everyFiveMinutes, t('2026-01-01T10:02:00Z'));
    expect(ticker.fire(t('2026-01-01T10:05:00.004Z'))).toStrictEqual({ tick: t('2026-01-01T10:05:00Z') });
    expect(ticker.fire(t('2026-01-01T10:14:00Z'))).toStrictEqual({ tick: t('2026-01-01T10:10:00Z') });
    expect(ticker.fire(t('2026-01-01T10:14:59.990Z'))).toStrictEqual({ tick: t('2026-01-01T10:15:00Z') });
    expect(ticker.fire(t('2026-01-01T10:19:00Z'))).toBeNull();
    expect(ticker.fire(t('2026-01-01T10:20:00Z'))).toStrictEqual({ tick: t('2026-01-01T10:20:00Z') });
  });

  it('ignores a fire long before the expected tick', () => {
    const ticker = new CronTicker(everyFiveMinutes, t('2026-01-01T10:02:00Z'));
    expect(ticker.fire(t('2026-01-01T10:03:00Z'))).toBeNull();
    expect(ticker.fire(t('2026-01-01T10:05:00Z'))).toStrictEqual({ tick: t('2026-01-01T10:05:00Z') });
  });

  it('after a stall enqueues the latest due tick and counts the ones it skipped', () => {
    const perSecond = new CronSchedule('* * * * * *', 'UTC');
    const ticker = new CronTicker(perSecond, t('2026-01-01T10:00:00.100Z'));
    // A 2.2 s stall: ticks 10:00:01 and 10:00:02 fell due, the timer fires at 10:00:03.3.
    expect(ticker.fire(t('2026-01-01T10:00:03.300Z'))).toEqual({
      tick: t('2026-01-01T10:00:03Z'),
      missed: { count: 2, from: t('2026-01-01T10:00:01Z'), to: t('2026-01-01T10:00:02Z') },
    });
    expect(ticker.fire(t('2026-01-01T10:00:03.800Z'))).toBeNull();
    expect(ticker.fire(t('2026-01-01T10:00:04Z'))).toStrictEqual({ tick: t('2026-01-01T10:00:04Z') });
  });

  it('catches up 30 days of a per-second schedule without walking its 2.6 million ticks', () => {
    // Walking every tick (as the old tickFor did, ~150 µs each) would take minutes; this is 30 day-steps.
    const perSecond = new CronSchedule('* * * * * *', 'Europe/Berlin');
    const ticker = new CronTicker(perSecond, t('2024-10-01T00:00:00Z'));
    const due = ticker.fire(t('2024-10-31T00:00:00.500Z'));
    expect(due).toEqual({
      tick: t('2024-10-31T00:00:00Z'),
      missed: { count: 30 * 86_400 - 1, from: t('2024-10-01T00:00:01Z'), to: t('2024-10-30T23:59:59Z') },
    });
  });

  it('catches up 30 days of a 5-minute fixed-hour schedule across a clock change, counting each time once', () => {
    // 12 a day; 02:xx is repeated on 10-27 and counted once (the fields do not start with `*`: fixed).
    const schedule = new CronSchedule('0-55/5 2 * * *', 'Europe/Berlin');
    const ticker = new CronTicker(schedule, t('2024-10-10T12:00:00Z'));
    const due = ticker.fire(t('2024-11-09T12:00:00Z'));
    expect(due?.tick).toEqual(t('2024-11-09T01:55:00Z'));
    expect(due?.missed?.count).toBe(30 * 12 - 1);
  });

  it('gives two instances the same tick for one occurrence, on either side of a clock change', () => {
    // Daily 01:30 New York; on 2024-11-03 01:30 is shown at 05:30Z (EDT) and again at 06:30Z (EST).
    const schedule = new CronSchedule('30 1 * * *', 'America/New_York');
    const onTime = new CronTicker(schedule, t('2024-11-02T12:00:00Z'));
    const late = new CronTicker(schedule, t('2024-11-02T12:00:00Z'));
    expect(onTime.fire(t('2024-11-03T05:30:00.010Z'))?.tick).toEqual(t('2024-11-03T05:30:00Z'));
    expect(late.fire(t('2024-11-03T06:05:00Z'))).toStrictEqual({ tick: t('2024-11-03T05:30:00Z') });
    // An instance started during the repeated hour does not fire 01:30 again.
    const startedLate = new CronTicker(schedule, t('2024-11-03T06:10:00Z'));
    expect(startedLate.fire(t('2024-11-03T06:30:00Z'))).toBeNull();
    expect(startedLate.fire(t('2024-11-04T06:30:00Z'))).toStrictEqual({ tick: t('2024-11-04T06:30:00Z') });
  });
});
