import { IANAZone } from 'luxon';

const SECOND_MS = 1000;
const MINUTE_MS = 60_000;
/**
 * Zone rules change a zone's offset at most once in any two days (true of every IANA zone for decades), so checking
 * offsets a day apart finds every transition.
 */
export const STEP_MS = 86_400_000;

/** A change of a zone's UTC offset: from `at` (an instant, whole seconds) the offset is `after` instead of `before`. */
export interface ZoneTransition {
  at: number;
  before: number;
  after: number;
}

/** UTC offsets of one IANA zone, in milliseconds, and the transitions between them. */
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

  /** Every transition in `(from, to]`, found by sampling one offset per day of the range. */
  transitionsIn(from: number, to: number): ZoneTransition[] {
    const found: ZoneTransition[] = [];
    for (let lo = from; lo < to; lo += STEP_MS) {
      const hi = Math.min(lo + STEP_MS, to);
      if (this.offsetAt(lo) !== this.offsetAt(hi)) found.push(this.transitionIn(lo, hi));
    }
    return found;
  }
}
