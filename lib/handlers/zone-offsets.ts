import { IANAZone } from 'luxon';
import { DAY_MS, MINUTE_MS, SECOND_MS } from '../model/time-units.js';

/** A change of a zone's UTC offset: from `at` (an instant, whole seconds) the offset is `after` instead of `before`. */
export interface ZoneTransition {
  at: number;
  before: number;
  after: number;
}

/**
 * UTC offsets of one IANA zone, in milliseconds, and the transitions between them. Zone rules change a zone's offset
 * at most once in any two days (true of every IANA zone for decades), so offsets looked up a day apart (`DAY_MS`)
 * differ exactly where one transition lies between them.
 */
export class ZoneOffsets {
  private readonly zone: IANAZone;

  constructor(timeZone: string) {
    this.zone = IANAZone.create(timeZone);
  }

  /** The offset at instant `at` (ms); the wall-clock reading at `at` is `at + offsetAt(at)`. */
  offsetAt(at: number): number {
    return this.zone.offset(at) * MINUTE_MS;
  }

  /**
   * The transition in `(from, to]`, given that the offsets at both ends differ and the range holds one transition:
   * a binary search over whole seconds (about 17 offset look-ups for a day).
   */
  transitionIn(from: number, to: number): ZoneTransition {
    const before = this.offsetAt(from);
    let [lo, hi] = [Math.floor(from / SECOND_MS), Math.ceil(to / SECOND_MS)];
    while (hi - lo > 1) {
      const mid = Math.floor((lo + hi) / 2);
      if (this.offsetAt(mid * SECOND_MS) === before) lo = mid;
      else hi = mid;
    }
    return { at: hi * SECOND_MS, before, after: this.offsetAt(hi * SECOND_MS) };
  }

  /** Every transition in `(from, to]`, found by looking up one offset per day of the range. */
  transitionsIn(from: number, to: number): ZoneTransition[] {
    const found: ZoneTransition[] = [];
    let offset = this.offsetAt(from);
    for (let lo = from; lo < to; lo += DAY_MS) {
      const hi = Math.min(lo + DAY_MS, to);
      const next = this.offsetAt(hi);
      if (next !== offset) found.push(this.transitionIn(lo, hi));
      offset = next;
    }
    return found;
  }
}
