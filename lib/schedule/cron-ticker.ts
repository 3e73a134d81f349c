import type { CronSchedule } from './schedule-tick';

/** A timer may fire a moment before its instant; it still stands for the tick it was set for. */
const EARLY_FIRE_TOLERANCE_MS = 100;

/** What one timer fire stands for. */
export interface DueTick {
  /** The tick to enqueue: the latest one due. */
  tick: Date;
  /** Earlier due ticks this instance did not fire (it stalled or slept); they are counted, not enqueued. */
  missed: number;
  /** The first and last of the missed ticks, when `missed > 0`. */
  missedFrom?: Date;
  missedTo?: Date;
}

/**
 * One instance's progress through a schedule. Catch-up policy: when the timer fires after several ticks fell due
 * (the event loop stalled, the process was suspended), only the latest due tick is enqueued; the others are counted
 * so the caller can log them. Deciding that costs a few offset look-ups plus one step per day of the gap, whatever
 * the number of ticks in it.
 */
export class CronTicker {
  private expected: Date;

  /** Throws when the schedule never fires after `startedAt`. */
  constructor(
    readonly schedule: CronSchedule,
    startedAt: Date,
  ) {
    this.expected = this.after(startedAt);
  }

  /** The next tick this instance waits for. */
  get next(): Date {
    return this.expected;
  }

  /** The tick a timer fire at `firedAt` stands for, or null when nothing is due yet (a spurious early fire). */
  fire(firedAt: Date): DueTick | null {
    const expected = this.expected;
    if (firedAt.getTime() < expected.getTime() - EARLY_FIRE_TOLERANCE_MS) return null;
    const following = this.after(expected);
    if (following.getTime() > firedAt.getTime()) {
      this.expected = following;
      return { tick: expected, missed: 0 };
    }
    // Several ticks fell due: enqueue the latest, count the ones between (never walking them one by one).
    const tick = this.schedule.latestTick(firedAt) ?? expected;
    const lastMissed = this.schedule.latestTick(new Date(tick.getTime() - 1)) ?? expected;
    const missed = this.schedule.countTicks(new Date(expected.getTime() - 1000), lastMissed);
    this.expected = this.after(tick);
    return { tick, missed, missedFrom: expected, missedTo: lastMissed };
  }

  private after(instant: Date): Date {
    const next = this.schedule.nextTick(instant);
    if (!next) throw new Error(`"${this.schedule.expression}" never fires after ${instant.toISOString()}`);
    return next;
  }
}
