import { describe, expect, it } from '@jest/globals';
import { CronTime } from 'cron';
import { nextTick, tickFor } from '../../lib/schedule/schedule-tick';

describe('tickFor', () => {
  const everyFiveMinutes = new CronTime('*/5 * * * *', 'Europe/Berlin');
  const t = (iso: string) => new Date(iso);

  it('is the expected tick when the timer fires on time or late within the period', () => {
    expect(tickFor(everyFiveMinutes, t('2026-01-01T10:05:00Z'), t('2026-01-01T10:05:00.004Z'))).toEqual(
      t('2026-01-01T10:05:00Z'),
    );
    expect(tickFor(everyFiveMinutes, t('2026-01-01T10:05:00Z'), t('2026-01-01T10:08:59Z'))).toEqual(
      t('2026-01-01T10:05:00Z'),
    );
  });

  it('is the expected tick when the timer fires a little early', () => {
    expect(tickFor(everyFiveMinutes, t('2026-01-01T10:05:00Z'), t('2026-01-01T10:04:59.990Z'))).toEqual(
      t('2026-01-01T10:05:00Z'),
    );
  });

  it('is the latest tick when the timer slept through several', () => {
    expect(tickFor(everyFiveMinutes, t('2026-01-01T10:05:00Z'), t('2026-01-01T10:21:00Z'))).toEqual(
      t('2026-01-01T10:20:00Z'),
    );
  });

  it('reads the expression in its time zone (daily 09:00 Berlin is 08:00 UTC in winter, 07:00 in summer)', () => {
    const daily = new CronTime('0 9 * * *', 'Europe/Berlin');
    expect(nextTick(daily, t('2026-01-10T12:00:00Z'))).toEqual(t('2026-01-11T08:00:00Z'));
    expect(nextTick(daily, t('2026-07-10T12:00:00Z'))).toEqual(t('2026-07-11T07:00:00Z'));
  });
});
