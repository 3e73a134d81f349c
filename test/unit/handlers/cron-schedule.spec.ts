import { describe, expect, it } from '@jest/globals';
import { DateTime } from 'luxon';
import { CronFields, parseCron } from '../../../lib/handlers/cron-fields';
import { CronSchedule } from '../../../lib/handlers/cron-schedule';
import { ZoneOffsets } from '../../../lib/handlers/zone-offsets';

const t = (iso: string) => new Date(iso);
const HOUR = 3_600_000;

/** Every tick of `schedule` in [from, to), walked with nextTick. */
function ticksBetween(schedule: CronSchedule, from: Date, to: Date): Date[] {
  const ticks: Date[] = [];
  let tick = schedule.nextTick(new Date(from.getTime() - 1));
  while (tick && tick < to) {
    ticks.push(tick);
    tick = schedule.nextTick(tick);
  }
  return ticks;
}

/** The local date and time a tick shows in its zone. */
const shown = (tick: Date, zone: string) => DateTime.fromJSDate(tick, { zone }).toFormat("yyyy-MM-dd'T'HH:mm");

/** The local times (`HH:mm`) `expression` fires at on one local day of `zone`, in firing order. */
function onLocalDay(expression: string, zone: string, date: string): string[] {
  const day = DateTime.fromISO(date, { zone }).startOf('day');
  const nextDay = day.plus({ days: 1 }).startOf('day');
  const ticks = ticksBetween(new CronSchedule(expression, zone), day.toJSDate(), nextDay.toJSDate());
  return ticks.map((tick) => shown(tick, zone).slice(11));
}

/**
 * 2024's clock changes (tzdata), and for each zone daily times that fall into the skipped stretch on the day clocks
 * go forward and into the repeated stretch on the day they go back, with the one instant each must fire at.
 */
const ZONES: {
  zone: string;
  changes: string[];
  /** `HH:mm` → { local date → the single expected tick } for the days where that time is skipped or repeated. */
  special: Record<string, Record<string, string>>;
}[] = [
  {
    zone: 'America/New_York',
    changes: ['2024-03-10T07:00:00Z -300→-240', '2024-11-03T06:00:00Z -240→-300'],
    special: {
      '02:00': { '2024-03-10': '2024-03-10T07:00:00Z' }, // skipped: fires at the jump (03:00 EDT)
      '02:30': { '2024-03-10': '2024-03-10T07:00:00Z' },
      '01:30': { '2024-11-03': '2024-11-03T05:30:00Z' }, // repeated: first showing only (EDT)
    },
  },
  {
    zone: 'Europe/Berlin',
    changes: ['2024-03-31T01:00:00Z 60→120', '2024-10-27T01:00:00Z 120→60'],
    special: {
      '02:30': { '2024-03-31': '2024-03-31T01:00:00Z', '2024-10-27': '2024-10-27T00:30:00Z' },
    },
  },
  {
    zone: 'Australia/Lord_Howe', // 30-minute shifts: 02:00 → 01:30 in April, 02:00 → 02:30 in October
    changes: ['2024-04-06T15:00:00Z 660→630', '2024-10-05T15:30:00Z 630→660'],
    special: {
      '01:45': { '2024-04-07': '2024-04-06T14:45:00Z' },
      '02:15': { '2024-10-06': '2024-10-05T15:30:00Z' },
    },
  },
  {
    zone: 'America/Santiago', // changes at midnight: 24:00 → 23:00 in April, 00:00 → 01:00 in September
    changes: ['2024-04-07T03:00:00Z -180→-240', '2024-09-08T04:00:00Z -240→-180'],
    special: {
      '00:00': { '2024-09-08': '2024-09-08T04:00:00Z' },
      '23:30': { '2024-04-06': '2024-04-07T02:30:00Z' },
    },
  },
  {
    zone: 'Africa/Cairo', // 00:00 → 01:00 in April, 24:00 → 23:00 in October
    changes: ['2024-04-25T22:00:00Z 120→180', '2024-10-31T21:00:00Z 180→120'],
    special: {
      '00:00': { '2024-04-26': '2024-04-25T22:00:00Z' },
      '23:30': { '2024-10-31': '2024-10-31T20:30:00Z' },
    },
  },
  {
    zone: 'Asia/Beirut', // 00:00 → 01:00 in March, 24:00 → 23:00 in October
    changes: ['2024-03-30T22:00:00Z 120→180', '2024-10-26T21:00:00Z 180→120'],
    special: {
      '00:00': { '2024-03-31': '2024-03-30T22:00:00Z' },
      '23:30': { '2024-10-26': '2024-10-26T20:30:00Z' },
    },
  },
  { zone: 'Asia/Tokyo', changes: [], special: { '02:30': {} } },
];

const YEAR_START = t('2023-12-31T00:00:00Z');
const YEAR_END = t('2025-01-02T00:00:00Z');

/**
 * The local days of 2024 a year-long check walks, rather than all 366 (walking every day of every zone cost half a
 * minute of the suite): the days around each clock change and each special day (two either side, where a mistake
 * would show), and every fifth day of the year (every month, every weekday, both offsets of every zone).
 */
function sampledDays(zone: string, changes: string[], specialDates: string[]): DateTime[] {
  const dates = new Set<string>();
  const around = (day: DateTime) => {
    for (let offset = -2; offset <= 2; offset += 1) dates.add(day.plus({ days: offset }).toISODate() as string);
  };
  for (const change of changes) around(DateTime.fromISO(change.slice(0, 20), { zone }));
  for (const date of specialDates) around(DateTime.fromISO(date, { zone }));
  for (let day = DateTime.fromISO('2024-01-01', { zone }); day.year === 2024; day = day.plus({ days: 5 })) {
    dates.add(day.toISODate() as string);
  }
  return [...dates]
    .filter((date) => date.startsWith('2024-'))
    .sort()
    .map((date) => DateTime.fromISO(date, { zone }).startOf('day'));
}

/** The ticks of `schedule` on one local day (from its start to the next day's start, in its zone). */
const ticksOn = (schedule: CronSchedule, day: DateTime) =>
  ticksBetween(schedule, day.toJSDate(), day.plus({ days: 1 }).startOf('day').toJSDate());

describe('ZoneOffsets', () => {
  it.each(ZONES.map((z) => [z.zone, z.changes] as const))('finds the 2024 clock changes of %s', (zone, changes) => {
    const found = new ZoneOffsets(zone).transitionsIn(YEAR_START.getTime(), YEAR_END.getTime());
    const described = found.map(
      (c) => `${new Date(c.at).toISOString().replace('.000', '')} ${c.before / 60_000}→${c.after / 60_000}`,
    );
    expect(described).toEqual(changes);
  });
});

describe('CronSchedule: daily schedules across a year of clock changes', () => {
  const cases = ZONES.flatMap(({ zone, changes, special }) =>
    [...new Set(['00:00', '12:00', ...Object.keys(special)])].map(
      (time) => [zone, time, special[time] ?? {}, changes] as const,
    ),
  );

  it.each(cases)(
    '%s at %s fires exactly once per local day of 2024 (sampled days, and the count for the year), at the expected instant',
    (zone, time, special, changes) => {
      const [hour, minute] = time.split(':').map(Number);
      const schedule = new CronSchedule(`${minute} ${hour} * * *`, zone);
      for (const day of sampledDays(zone, changes, Object.keys(special))) {
        const date = day.toISODate() as string;
        // Outside the special days the time exists exactly once, so luxon's reading of it is unambiguous.
        const expected =
          special[date] ?? DateTime.fromISO(`${date}T${time}`, { zone }).toUTC().toISO({ suppressMilliseconds: true });
        const ticks = ticksOn(schedule, day).map((tick) => tick.toISOString().replace('.000', ''));
        expect([date, ticks]).toEqual([date, [expected]]);
      }
      // And no day of the year, sampled or not, has no tick or two.
      const [from, to] = ['2024-01-01', '2025-01-01'].map((date) => DateTime.fromISO(date, { zone }).toJSDate());
      expect(schedule.countTicks(new Date(from.getTime() - 1), new Date(to.getTime() - 1))).toBe(366);
    },
  );

  it('fires the issue examples once: New York 02:00 on 2024-11-03 and Berlin 03:00 on 2024-10-27', () => {
    expect(
      ticksBetween(
        new CronSchedule('0 2 * * *', 'America/New_York'),
        t('2024-11-03T00:00:00Z'),
        t('2024-11-04T00:00:00Z'),
      ),
    ).toEqual([t('2024-11-03T07:00:00Z')]);
    expect(
      ticksBetween(
        new CronSchedule('0 3 * * *', 'Europe/Berlin'),
        t('2024-10-26T12:00:00Z'),
        t('2024-10-27T12:00:00Z'),
      ),
    ).toEqual([t('2024-10-27T02:00:00Z')]);
  });
});

describe('CronSchedule: real-time and fixed schedules', () => {
  it.each(ZONES.map((z) => [z.zone, z.changes] as const))(
    'every 30 minutes (minute field `*/30`) in %s runs in real time all year (sampled days, and the count for the year)',
    (zone, changes) => {
      const schedule = new CronSchedule('*/30 * * * *', zone);
      for (const day of sampledDays(zone, changes, [])) {
        // From the last tick of the day before, so the gap across midnight is checked too.
        const ticks = ticksBetween(
          schedule,
          new Date(day.toJSDate().getTime() - 30 * 60_000),
          day.plus({ days: 1 }).startOf('day').toJSDate(),
        );
        const gaps = new Set(ticks.slice(1).map((tick, i) => tick.getTime() - ticks[i].getTime()));
        expect([day.toISODate(), gaps]).toEqual([day.toISODate(), new Set([30 * 60_000])]);
      }
      const from = DateTime.fromISO('2024-01-01T00:00', { zone }).toJSDate();
      const to = DateTime.fromISO('2025-01-01T00:00', { zone }).toJSDate();
      expect(schedule.countTicks(new Date(from.getTime() - 1), new Date(to.getTime() - 1))).toBe(366 * 48);
    },
  );

  it('hourly (real time) fires at both showings of a repeated hour and not in a skipped one', () => {
    const perDay = (zone: string, date: string) => onLocalDay('0 * * * *', zone, date);
    expect(perDay('America/New_York', '2024-11-03')).toHaveLength(25);
    expect(perDay('America/New_York', '2024-11-03').slice(0, 4)).toEqual(['00:00', '01:00', '01:00', '02:00']);
    expect(perDay('America/New_York', '2024-03-10')).toHaveLength(23);
    expect(perDay('America/New_York', '2024-03-10')).not.toContain('02:00');
    // Lord Howe repeats and skips 01:30–02:00 / 02:00–02:30: no whole hour is shown twice, 02:00 is skipped once.
    expect(perDay('Australia/Lord_Howe', '2024-04-07')).toHaveLength(24);
    expect(perDay('Australia/Lord_Howe', '2024-10-06')).toHaveLength(23);
    expect(perDay('America/Santiago', '2024-04-06')).toHaveLength(25);
    expect(perDay('America/Santiago', '2024-09-08')).toHaveLength(23);
  });

  it('a fixed schedule fires each wall-clock time once: repeated times once, skipped times once at the jump', () => {
    const zone = 'America/New_York';
    expect(
      ticksBetween(new CronSchedule('0,15,30,45 1 * * *', zone), t('2024-11-03T04:00:00Z'), t('2024-11-03T12:00:00Z')),
    ).toEqual([
      t('2024-11-03T05:00:00Z'),
      t('2024-11-03T05:15:00Z'),
      t('2024-11-03T05:30:00Z'),
      t('2024-11-03T05:45:00Z'),
    ]);
    expect(
      ticksBetween(new CronSchedule('0,15,30,45 2 * * *', zone), t('2024-03-10T05:00:00Z'), t('2024-03-10T12:00:00Z')),
    ).toEqual([t('2024-03-10T07:00:00Z')]);
    // 02:00 is skipped and 03:00 is the jump's own reading: one tick for both.
    expect(
      ticksBetween(new CronSchedule('0 2,3 * * *', zone), t('2024-03-10T05:00:00Z'), t('2024-03-10T12:00:00Z')),
    ).toEqual([t('2024-03-10T07:00:00Z')]);
  });

  it('follows Vixie cron: a minute or hour field that starts with * runs in real time, any other is fixed', () => {
    const [newYork, berlin] = ['America/New_York', 'Europe/Berlin'];
    // Real time: 01:xx is shown twice on New York's 2024-11-03, 02:xx never on 2024-03-10.
    expect(onLocalDay('*/15 1 * * *', newYork, '2024-11-03')).toEqual([
      ...['01:00', '01:15', '01:30', '01:45'],
      ...['01:00', '01:15', '01:30', '01:45'],
    ]);
    expect(onLocalDay('*/15 2 * * *', newYork, '2024-03-10')).toEqual([]);
    expect(onLocalDay('0 */2 * * *', berlin, '2024-10-27')).toHaveLength(13); // 02:00 twice
    expect(onLocalDay('0 */2 * * *', berlin, '2024-03-31')).toHaveLength(11); // no 02:00
    expect(onLocalDay('@hourly', newYork, '2024-11-03')).toHaveLength(25);
    expect(onLocalDay('0 * 1 * * *', newYork, '2024-11-03')).toHaveLength(120); // 6 fields: the minute is `*`
    // Fixed, even when the fields allow every hour: each wall-clock time once, skipped ones at the jump.
    expect(onLocalDay('0 0-23 * * *', newYork, '2024-11-03')).toHaveLength(24);
    expect(onLocalDay('0 0-23 * * *', newYork, '2024-03-10')).toHaveLength(23);
    expect(onLocalDay('0,15,30,45 1 * * *', newYork, '2024-11-03')).toEqual(['01:00', '01:15', '01:30', '01:45']);
    expect(
      ticksBetween(new CronSchedule('*/10 0 2 * * *', newYork), t('2024-03-10T05:00:00Z'), t('2024-03-10T12:00:00Z')),
    ).toEqual([t('2024-03-10T07:00:00Z')]);
  });

  it('reads the expression in its time zone (daily 09:00 Berlin is 08:00 UTC in winter, 07:00 in summer)', () => {
    const daily = new CronSchedule('0 9 * * *', 'Europe/Berlin');
    expect(daily.nextTick(t('2026-01-10T12:00:00Z'))).toEqual(t('2026-01-11T08:00:00Z'));
    expect(daily.nextTick(t('2026-07-10T12:00:00Z'))).toEqual(t('2026-07-11T07:00:00Z'));
  });

  it('knows an expression that never matches, whose tick look-ups throw', () => {
    const never = new CronSchedule('0 0 30 2 *', 'UTC');
    expect(never.neverMatches).toBe(true);
    expect(() => never.nextTick(t('2026-01-01T00:00:00Z'))).toThrow(
      '"0 0 30 2 *" has no tick after 2026-01-01T00:00:00.000Z',
    );
    expect(() => never.latestTick(t('2026-01-01T00:00:00Z'))).toThrow('has no tick at or before');
    // February 29 exists every 4 to 8 years: rare, but it matches.
    expect(new CronSchedule('0 0 29 2 *', 'UTC').neverMatches).toBe(false);
    expect(new CronSchedule('0 0 29 2 *', 'UTC').nextTick(t('2097-01-01T00:00:00Z'))).toEqual(
      t('2104-02-29T00:00:00Z'),
    );
  });
});

describe('CronSchedule: latestTick and countTicks agree with walking the ticks', () => {
  const windows = ZONES.flatMap(({ zone, changes }) =>
    changes.flatMap((change) =>
      ['17 */2 * * *', '*/30 1,2,23 * * *', '*/20 * * * *', '0 0 * * *', '30 1,2,23 * * *', '0,40 0-23/2 * * *'].map(
        (expression) => [zone, change.slice(0, 20), expression] as const,
      ),
    ),
  );

  it.each(windows)('%s around %s for %s', (zone, change, expression) => {
    const schedule = new CronSchedule(expression, zone);
    const from = new Date(t(change).getTime() - 30 * HOUR);
    const ticks = ticksBetween(schedule, new Date(from.getTime() - 48 * HOUR), new Date(from.getTime() + 60 * HOUR));
    const actual: unknown[] = [];
    const expected: unknown[] = [];
    for (let probe = from.getTime() + 1_000; probe < from.getTime() + 60 * HOUR; probe += 23 * 60_000 + 13_000) {
      const upTo = ticks.filter((tick) => tick.getTime() <= probe);
      actual.push([new Date(probe), schedule.latestTick(new Date(probe)), schedule.countTicks(from, new Date(probe))]);
      expected.push([new Date(probe), upTo.at(-1), upTo.filter((tick) => tick > from).length]);
    }
    expect(actual).toEqual(expected);
  });
});

describe('CronFields', () => {
  it('reads the cron package parse, including aliases, presets and the either-day rule', () => {
    const fields = (expression: string) => new CronFields(parseCron(expression));
    const weekdaysAtNine = fields('0 9 * * mon-fri');
    expect(weekdaysAtNine.nextAtOrAfter(Date.UTC(2026, 0, 3))).toBe(Date.UTC(2026, 0, 5, 9)); // Sat → Mon
    const daily = fields('@daily');
    expect(daily.previousAtOrBefore(Date.UTC(2026, 0, 3, 5))).toBe(Date.UTC(2026, 0, 3));
    // Day 1 of the month or any Sunday (both day fields restricted).
    const either = fields('0 0 1 * 0');
    expect(either.nextAtOrAfter(Date.UTC(2026, 0, 2))).toBe(Date.UTC(2026, 0, 4));
    expect(either.countBetween(Date.UTC(2026, 0, 1), Date.UTC(2026, 0, 31))).toBe(4); // Sundays 4, 11, 18, 25
    expect(fields('0-58 * * * * *').countBetween(0, 60_000)).toBe(59);
  });
});
