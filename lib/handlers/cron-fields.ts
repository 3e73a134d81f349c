import { CronTime } from 'cron';
import { DAY_MS, floorSecond, SECOND_MS } from '../model/time-units.js';

/**
 * How far the searches look. An expression that matches at all matches at least once every 8 years: the rarest day
 * is February 29, and leap years are at most 8 years apart (2096 → 2104); a weekday recurs every week. So finding
 * nothing within 28 years means the expression never matches (`0 0 30 2 *`).
 */
const SEARCH_YEARS = 28;

type FieldName = 'second' | 'minute' | 'hour' | 'dayOfMonth' | 'month' | 'dayOfWeek';

/** One cron field: its allowed values, ascending, and how many allowed values lie below each value. */
class Field {
  readonly values: readonly number[];
  private readonly allowed: boolean[];
  private readonly below: number[];

  constructor(values: number[], size: number) {
    this.values = [...values].sort((a, b) => a - b);
    this.allowed = Array.from({ length: size }, (_, v) => values.includes(v));
    this.below = [0];
    for (let v = 0; v < size; v++) this.below.push(this.below[v] + (this.allowed[v] ? 1 : 0));
  }

  has(value: number): boolean {
    return this.allowed[value] === true;
  }

  /** The smallest allowed value ≥ `value`, or undefined. */
  atOrAfter(value: number): number | undefined {
    return this.values.find((v) => v >= value);
  }

  /** The largest allowed value ≤ `value`, or undefined. */
  atOrBefore(value: number): number | undefined {
    for (let i = this.values.length - 1; i >= 0; i--) if (this.values[i] <= value) return this.values[i];
    return undefined;
  }

  /** How many allowed values are < `value`. */
  countBelow(value: number): number {
    return this.below[value];
  }
}

/**
 * A cron expression's fields, matched against a *wall-clock reading* (local date and time, no zone), encoded as the
 * milliseconds of that reading taken as if it were UTC. Parsing is the `cron` package's (the same parser that
 * validates `@JobHandler({ cron })` and that `@nestjs/schedule` uses), so both agree on what an expression means.
 * Everything here is zone-free calendar arithmetic; `CronSchedule` maps readings to instants.
 */
export class CronFields {
  private readonly second: Field;
  private readonly minute: Field;
  private readonly hour: Field;
  private readonly dayOfMonth: Field;
  private readonly month: Field;
  private readonly dayOfWeek: Field;
  /** `cron`'s rule (Vixie's): when both day fields are restricted, a day matching either one matches. */
  private readonly domRestricted: boolean;
  private readonly dowRestricted: boolean;
  private readonly perDay: number;

  /** Reads the fields of `parsed` (see `parseCron`); throws when the `cron` package's parse is no longer readable. */
  constructor(parsed: CronTime) {
    const fields = readParsedFields(parsed);
    this.second = new Field(fields.second, 60);
    this.minute = new Field(fields.minute, 60);
    this.hour = new Field(fields.hour, 24);
    this.dayOfMonth = new Field(fields.dayOfMonth, 32);
    this.month = new Field(fields.month, 13);
    this.dayOfWeek = new Field(fields.dayOfWeek, 7);
    this.domRestricted = this.dayOfMonth.values.length !== 31;
    this.dowRestricted = this.dayOfWeek.values.length !== 7;
    this.perDay = this.hour.values.length * this.minute.values.length * this.second.values.length;
  }

  /** True when some reading matches at all (`0 0 30 2 *` never does). */
  get matchesSomeDate(): boolean {
    return this.nextAtOrAfter(0) !== null;
  }

  /** True when `reading` (whole seconds) matches every field. */
  matches(reading: number): boolean {
    const d = new Date(reading);
    return (
      this.dayMatches(reading) &&
      this.hour.has(d.getUTCHours()) &&
      this.minute.has(d.getUTCMinutes()) &&
      this.second.has(d.getUTCSeconds())
    );
  }

  /** The first matching reading ≥ `from` (whole seconds), or null when none exists within 28 years. */
  nextAtOrAfter(from: number): number | null {
    let t = Math.ceil(from / SECOND_MS) * SECOND_MS;
    const lastYear = new Date(t).getUTCFullYear() + SEARCH_YEARS;
    for (;;) {
      const d = new Date(t);
      const [y, mo, day] = [d.getUTCFullYear(), d.getUTCMonth() + 1, d.getUTCDate()];
      if (y > lastYear) return null;
      if (!this.month.has(mo)) {
        const m = this.month.atOrAfter(mo);
        t = m === undefined ? Date.UTC(y + 1, this.month.values[0] - 1, 1) : Date.UTC(y, m - 1, 1);
        continue;
      }
      if (!this.dayMatches(t)) {
        t = Date.UTC(y, mo - 1, day + 1);
        continue;
      }
      const [h, mi, s] = [d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds()];
      const hour = this.hour.atOrAfter(h);
      if (hour === undefined) {
        t = Date.UTC(y, mo - 1, day + 1);
        continue;
      }
      if (hour > h) {
        t = Date.UTC(y, mo - 1, day, hour);
        continue;
      }
      const minute = this.minute.atOrAfter(mi);
      if (minute === undefined) {
        t = Date.UTC(y, mo - 1, day, h + 1);
        continue;
      }
      if (minute > mi) {
        t = Date.UTC(y, mo - 1, day, h, minute);
        continue;
      }
      const second = this.second.atOrAfter(s);
      if (second === undefined) {
        t = Date.UTC(y, mo - 1, day, h, mi + 1);
        continue;
      }
      return Date.UTC(y, mo - 1, day, h, mi, second);
    }
  }

  /** The last matching reading ≤ `from` (whole seconds), or null when none exists within 28 years. */
  previousAtOrBefore(from: number): number | null {
    let t = floorSecond(from);
    const firstYear = new Date(t).getUTCFullYear() - SEARCH_YEARS;
    for (;;) {
      const d = new Date(t);
      const [y, mo, day] = [d.getUTCFullYear(), d.getUTCMonth() + 1, d.getUTCDate()];
      if (y < firstYear) return null;
      if (!this.month.has(mo)) {
        const m = this.month.atOrBefore(mo);
        // The last second of month m (day 0 of the following month is m's last day).
        t = m === undefined ? Date.UTC(y, 0, 1) - SECOND_MS : Date.UTC(y, m, 1) - SECOND_MS;
        continue;
      }
      if (!this.dayMatches(t)) {
        t = Date.UTC(y, mo - 1, day) - SECOND_MS;
        continue;
      }
      const [h, mi, s] = [d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds()];
      const hour = this.hour.atOrBefore(h);
      if (hour === undefined) {
        t = Date.UTC(y, mo - 1, day) - SECOND_MS;
        continue;
      }
      if (hour < h) {
        t = Date.UTC(y, mo - 1, day, hour + 1) - SECOND_MS;
        continue;
      }
      const minute = this.minute.atOrBefore(mi);
      if (minute === undefined) {
        t = Date.UTC(y, mo - 1, day, h) - SECOND_MS;
        continue;
      }
      if (minute < mi) {
        t = Date.UTC(y, mo - 1, day, h, minute + 1) - SECOND_MS;
        continue;
      }
      const second = this.second.atOrBefore(s);
      if (second === undefined) {
        t = Date.UTC(y, mo - 1, day, h, mi) - SECOND_MS;
        continue;
      }
      return Date.UTC(y, mo - 1, day, h, mi, second);
    }
  }

  /**
   * How many matching readings lie in `(from, to]` (whole seconds). Costs one step per calendar day of the range,
   * never one per match: a month of a per-second schedule is 31 steps, not 2.6 million.
   */
  countBetween(from: number, to: number): number {
    if (to <= from) return 0;
    // Count readings < end minus readings < start, with end/start one second past the bounds.
    const start = floorSecond(from) + SECOND_MS;
    const end = floorSecond(to) + SECOND_MS;
    const startDay = Math.floor(start / DAY_MS) * DAY_MS;
    const endDay = Math.floor(end / DAY_MS) * DAY_MS;
    let count = this.countInDayBefore(end) - this.countInDayBefore(start);
    for (let day = startDay; day < endDay; day += DAY_MS) {
      if (this.dayMatches(day)) count += this.perDay;
    }
    return count;
  }

  /** Matching readings on `reading`'s day strictly before it. */
  private countInDayBefore(reading: number): number {
    if (!this.dayMatches(reading)) return 0;
    const d = new Date(reading);
    const [h, mi, s] = [d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds()];
    const seconds = this.second.values.length;
    let count = this.hour.countBelow(h) * this.minute.values.length * seconds;
    if (this.hour.has(h)) {
      count += this.minute.countBelow(mi) * seconds;
      if (this.minute.has(mi)) count += this.second.countBelow(s);
    }
    return count;
  }

  private dayMatches(reading: number): boolean {
    const d = new Date(reading);
    if (!this.month.has(d.getUTCMonth() + 1)) return false;
    const dom = this.dayOfMonth.has(d.getUTCDate());
    const dow = this.dayOfWeek.has(d.getUTCDay());
    if (this.domRestricted && this.dowRestricted) return dom || dow;
    return dom && dow;
  }
}

/** Parses `expression` with the `cron` package; throws its error, naming the problem, when the expression is invalid. */
export function parseCron(expression: string): CronTime {
  return new CronTime(expression, 'UTC');
}

/**
 * Reads the allowed values the `cron` package parsed. They are not part of its typed API, so their shape is checked:
 * an upgrade that changes it fails loudly here (and in the unit tests), not silently at some tick.
 */
function readParsedFields(cronTime: CronTime): Record<FieldName, number[]> {
  const source = cronTime as unknown as Record<FieldName, unknown>;
  const read = (name: FieldName): number[] => {
    const field = source[name];
    const values = field && typeof field === 'object' ? Object.keys(field).map(Number) : [];
    if (values.length === 0 || values.some((v) => !Number.isInteger(v))) {
      throw new Error(`the installed cron package no longer exposes its parsed ${name} field`);
    }
    return values;
  };
  return {
    second: read('second'),
    minute: read('minute'),
    hour: read('hour'),
    dayOfMonth: read('dayOfMonth'),
    month: read('month'),
    dayOfWeek: read('dayOfWeek'),
  };
}
