import type { CronTime } from 'cron';
import { DAY_MS, floorSecond, SECOND_MS } from '../model/time-units.js';
import { CronFields, parseCron } from './cron-fields.js';
import { ZoneOffsets } from './zone-offsets.js';

/** The `cron` package's presets whose minute or hour field is `*` (`@hourly` is `0 0 * * * *`). */
const REAL_TIME_PRESETS = new Set(['@hourly', '@minutely', '@secondly']);

/**
 * The instants ("ticks") at which a cron expression fires, read in an IANA time zone. Across clock changes it follows
 * Vixie cron (and cronie), which decides by how the minute and hour fields are written:
 *
 * - **Real time** when the minute or the hour field starts with `*` (`*\/5 * * * *`, `0 * * * *`, `*\/15 1 * * *`,
 *   `0 *\/2 * * *`, `@hourly`): the schedule fires whenever the zone's clock shows a matching time, so a repeated time
 *   fires again and a skipped time does not fire.
 * - **Fixed** otherwise, whatever values the fields allow (`0 2 * * *`, `0,30 1 * * *`, even `0 0-23 * * *`): each
 *   matching wall-clock time fires once, at the first instant the clock shows that time *or later*. A time the clocks
 *   show twice (they go back) fires on its first showing only; a time they skip (they go forward) fires once, at the
 *   moment of the jump. Several skipped times collapse into that one instant.
 *
 * A seconds field (6 fields) plays no part in the choice. Every tick is a whole second, and a tick instant stands for
 * exactly one occurrence, so it is the job's identity. All methods cost a handful of offset look-ups, or one step per
 * day of the range for `countTicks`.
 */
export class CronSchedule {
  private readonly fields: CronFields;
  private readonly zone: ZoneOffsets;
  private readonly realTime: boolean;

  /** `parsed` is `expression` parsed by `parseCron`, for a caller that parsed it already to validate it. */
  constructor(
    readonly expression: string,
    readonly timeZone: string,
    parsed: CronTime = parseCron(expression),
  ) {
    this.fields = new CronFields(parsed);
    this.zone = new ZoneOffsets(timeZone);
    this.realTime = runsInRealTime(expression);
  }

  /** True for an expression no date matches (`0 0 30 2 *`): it has no ticks, and nextTick/latestTick throw. */
  get neverMatches(): boolean {
    return !this.fields.matchesSomeDate;
  }

  /** The first tick strictly after `after`. */
  nextTick(after: Date): Date {
    const at = floorSecond(after.getTime());
    return this.tick(this.realTime ? this.nextRealTime(at + SECOND_MS) : this.nextFixed(at), 'after', after);
  }

  /** The last tick at or before `atOrBefore`. */
  latestTick(atOrBefore: Date): Date {
    const at = floorSecond(atOrBefore.getTime());
    return this.tick(this.realTime ? this.latestRealTime(at) : this.latestFixed(at), 'at or before', atOrBefore);
  }

  /** How many ticks lie in `(after, upTo]`, at one step per day of the range, never one per tick. */
  countTicks(after: Date, upTo: Date): number {
    const [from, to] = [floorSecond(after.getTime()), floorSecond(upTo.getTime())];
    if (to <= from) return 0;
    return this.realTime ? this.countRealTime(from, to) : this.countFixed(from, to);
  }

  /** A schedule that matches some date has a tick within any 28 years; only one that never matches has none. */
  private tick(found: number | null, relation: string, instant: Date): Date {
    if (found === null) throw new Error(`"${this.expression}" has no tick ${relation} ${instant.toISOString()}`);
    return new Date(found);
  }

  // Fixed schedules: tick(reading) = the first instant whose reading is ≥ reading; monotonic in the reading.

  private nextFixed(after: number): number | null {
    const reading = this.fields.nextAtOrAfter(this.highWater(after) + SECOND_MS);
    return reading === null ? null : this.firstShowing(reading);
  }

  private latestFixed(at: number): number | null {
    const reading = this.fields.previousAtOrBefore(this.highWater(at));
    return reading === null ? null : this.firstShowing(reading);
  }

  /** Distinct ticks of the readings in (highWater(from), highWater(to)]: skipped readings share one tick. */
  private countFixed(from: number, to: number): number {
    const [lo, hi] = [this.highWater(from), this.highWater(to)];
    let count = this.fields.countBetween(lo, hi);
    for (const change of this.zone.transitionsIn(from, to)) {
      if (change.after <= change.before) continue; // clocks went back: repeated readings were counted once
      const skippedFrom = Math.max(lo, change.at + change.before - SECOND_MS);
      const skippedTo = Math.min(hi, change.at + change.after - SECOND_MS);
      const skipped = this.fields.countBetween(skippedFrom, skippedTo);
      if (skipped === 0) continue;
      count -= skipped;
      // They all fire at the jump, which is one more tick unless the first reading after the jump matches too.
      if (!this.fields.matches(change.at + change.after)) count += 1;
    }
    return count;
  }

  /** The largest reading the clock has shown at or before `at` (after clocks go back, the pre-change reading). */
  private highWater(at: number): number {
    const offset = this.zone.offsetAt(at);
    const dayBefore = at - DAY_MS;
    if (this.zone.offsetAt(dayBefore) <= offset) return at + offset;
    const change = this.zone.transitionIn(dayBefore, at);
    return Math.max(at + offset, change.at - SECOND_MS + change.before);
  }

  /** The first instant at which the clock shows `reading` or later. */
  private firstShowing(reading: number): number {
    const [before, after] = [reading - DAY_MS, reading + DAY_MS];
    const offset = this.zone.offsetAt(before);
    if (offset === this.zone.offsetAt(after)) return reading - offset;
    const change = this.zone.transitionIn(before, after);
    if (reading - change.before < change.at) return reading - change.before;
    if (reading - change.after >= change.at) return reading - change.after;
    return change.at; // the clocks skipped this reading: fire when they jump past it
  }

  // Real-time schedules: ticks are the instants whose reading matches, walked one constant-offset stretch at a time.

  private nextRealTime(from: number): number | null {
    let at = from;
    for (;;) {
      const offset = this.zone.offsetAt(at);
      const reading = this.fields.nextAtOrAfter(at + offset);
      if (reading === null) return null;
      const tick = reading - offset;
      const horizon = Math.min(tick, at + DAY_MS);
      if (this.zone.offsetAt(horizon) !== offset) {
        at = this.zone.transitionIn(at, horizon).at;
      } else if (tick <= horizon) {
        return tick;
      } else {
        at = horizon;
      }
    }
  }

  private latestRealTime(to: number): number | null {
    let at = to;
    for (;;) {
      const offset = this.zone.offsetAt(at);
      const reading = this.fields.previousAtOrBefore(at + offset);
      if (reading === null) return null;
      const tick = reading - offset;
      const horizon = Math.max(tick, at - DAY_MS);
      if (this.zone.offsetAt(horizon) !== offset) {
        at = this.zone.transitionIn(horizon, at).at - SECOND_MS;
      } else if (tick >= horizon) {
        return tick;
      } else {
        at = horizon;
      }
    }
  }

  private countRealTime(from: number, to: number): number {
    let count = 0;
    let start = from;
    for (const change of [...this.zone.transitionsIn(from, to), null]) {
      const end = change ? change.at - SECOND_MS : to;
      const offset = this.zone.offsetAt(end);
      count += this.fields.countBetween(start + offset, end + offset);
      start = end;
    }
    return count;
  }
}

/** Vixie cron's rule (its `MIN_STAR | HR_STAR` flags): the minute or the hour field starts with `*`. */
function runsInRealTime(expression: string): boolean {
  const source = expression.trim().toLowerCase();
  if (source.startsWith('@')) return REAL_TIME_PRESETS.has(source);
  const fields = source.split(/\s+/);
  const [minute, hour] = fields.length === 6 ? fields.slice(1) : fields;
  return minute.startsWith('*') || hour.startsWith('*');
}
