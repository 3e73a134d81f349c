import type { CronSchedule } from '../handlers/cron-schedule.js';
import { SECOND_MS } from '../model/time-units.js';

/** A timer may fire a moment before its instant; it still stands for the tick it was set for. */
const EARLY_FIRE_TOLERANCE_MS = 100;

/** Due ticks an instance did not fire (it stalled or slept): counted, not enqueued. */
export interface MissedTicks {
  count: number;
  /** The first and the last of them. */
  from: Date;
  to: Date;
}

/** What one timer fire stands for. */
export interface DueTick {
  /** The tick to enqueue: the latest one due. */
  tick: Date;
  /** Earlier due ticks this fire skips; absent when there are none. */
  missed?: MissedTicks;
}

/**
 * One instance's progress through a schedule. Catch-up policy: when the timer fires after several ticks fell due
 * (the event loop stalled, the process was suspended), only the latest due tick is enqueued; the others are counted
 * so the caller can log them. Deciding that costs a few offset look-ups plus one step per day of the gap, whatever
 * the number of ticks in it.
 */
export class CronTicker {
  private expected: Date;

  /** `schedule` must match some date (see `CronSchedule.neverMatches`). */
  constructor(
    private readonly schedule: CronSchedule,
    startedAt: Date,
  ) {
    this.expected = schedule.nextTick(startedAt);
  }

  /** The tick a timer fire at `firedAt` stands for, or null when nothing is due yet (a spurious early fire). */
  fire(firedAt: Date): DueTick | null {
    const expected = this.expected;
    if (firedAt.getTime() < expected.getTime() - EARLY_FIRE_TOLERANCE_MS) return null;
    const following = this.schedule.nextTick(expected);
    if (following.getTime() > firedAt.getTime()) {
      this.expected = following;
      return { tick: expected };
    }
    // Several ticks fell due (`expected` < `following` ≤ `firedAt`): enqueue the latest, count the ones before it
    // without walking them one by one.
    const tick = this.schedule.latestTick(firedAt);
    const lastMissed = this.schedule.latestTick(new Date(tick.getTime() - 1));
    const count = this.schedule.countTicks(new Date(expected.getTime() - SECOND_MS), lastMissed);
    this.expected = this.schedule.nextTick(tick);
    return { tick, missed: { count, from: expected, to: lastMissed } };
  }
}
