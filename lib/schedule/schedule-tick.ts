import { CronFields } from './cron-fields';
import { STEP_MS, ZoneOffsets } from './zone-offsets';

const SECOND_MS = 1000;

const floorSecond = (ms: number) => Math.floor(ms / SECOND_MS) * SECOND_MS;

/**
 * The instants ("ticks") at which a cron expression fires, read in an IANA time zone. Two conventions, as in Vixie
 * cron, decided by the hour field:
 *
 * - **Fixed-hour schedules** (the hour field does not allow every hour, e.g. `0 2 * * *`, `*\/15 1 * * *`) fire once
 *   per matching wall-clock time, at the first instant the zone's clock shows that time *or later*. A time the clocks
 *   show twice (they go back) fires on its first showing only; a time they skip (they go forward) fires once, at the
 *   moment of the jump. Several skipped times collapse into that one instant.
 * - **Every-hour schedules** (`*` hours, e.g. `*\/5 * * * *`, `0 * * * *`) run in real time: they fire whenever the
 *   clock shows a matching time, so a repeated hour fires again and a skipped hour does not fire.
 *
 * Every tick is a whole second, and a tick instant stands for exactly one occurrence, so it is the job's identity.
 * All methods cost a handful of offset look-ups, or one step per day of the range for `countTicks`.
 */
export class CronSchedule {
  private readonly fields: CronFields;
  private readonly zone: ZoneOffsets;
  /** True for every-hour schedules (real time across clock changes), false for fixed-hour ones. */
  readonly realTime: boolean;

  constructor(
    readonly expression: string,
    readonly timeZone: string,
  ) {
    this.fields = new CronFields(expression);
    this.zone = new ZoneOffsets(timeZone);
    this.realTime = this.fields.everyHour;
  }

  /** The first tick strictly after `after`, or null when the expression never matches again (e.g. `0 0 30 2 *`). */
  nextTick(after: Date): Date | null {
    const at = floorSecond(after.getTime());
    return toDate(this.realTime ? this.nextRealTime(at + SECOND_MS) : this.nextFixed(at));
  }

  /** The last tick at or before `atOrBefore`, or null when there is none. */
  latestTick(atOrBefore: Date): Date | null {
    const at = floorSecond(atOrBefore.getTime());
    return toDate(this.realTime ? this.latestRealTime(at) : this.latestFixed(at));
  }

  /** How many ticks lie in `(after, upTo]`, at one step per day of the range, never one per tick. */
  countTicks(after: Date, upTo: Date): number {
    const [from, to] = [floorSecond(after.getTime()), floorSecond(upTo.getTime())];
    if (to <= from) return 0;
    return this.realTime ? this.countRealTime(from, to) : this.countFixed(from, to);
  }

  // Fixed-hour schedules: tick(reading) = the first instant whose reading is ≥ reading; monotonic in the reading.

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
    const dayBefore = at - STEP_MS;
    if (this.zone.offsetAt(dayBefore) <= offset) return at + offset;
    const change = this.zone.transitionIn(dayBefore, at);
    return Math.max(at + offset, change.at - SECOND_MS + change.before);
  }

  /** The first instant at which the clock shows `reading` or later. */
  private firstShowing(reading: number): number {
    const [before, after] = [reading - STEP_MS, reading + STEP_MS];
    const offset = this.zone.offsetAt(before);
    if (offset === this.zone.offsetAt(after)) return reading - offset;
    const change = this.zone.transitionIn(before, after);
    if (reading - change.before < change.at) return reading - change.before;
    if (reading - change.after >= change.at) return reading - change.after;
    return change.at; // the clocks skipped this reading: fire when they jump past it
  }

  // Every-hour schedules: ticks are the instants whose reading matches, walked one constant-offset stretch at a time.

  private nextRealTime(from: number): number | null {
    let at = from;
    for (;;) {
      const offset = this.zone.offsetAt(at);
      const reading = this.fields.nextAtOrAfter(at + offset);
      if (reading === null) return null;
      const tick = reading - offset;
      const horizon = Math.min(tick, at + STEP_MS);
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
      const horizon = Math.max(tick, at - STEP_MS);
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

function toDate(ms: number | null): Date | null {
  return ms === null ? null : new Date(ms);
}
