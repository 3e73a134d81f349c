import type { ClaimedJob } from '../model/claimed-job.js';
import { now } from '../model/clock.js';
import type { LastAttempts } from './last-attempts.js';

/**
 * When claims of the names without fleet-wide limits look for expired leases, and the search itself: at most once per
 * poll interval while pending work keeps the worker busy (a lease only expires `leaseMs` after its last renewal, so
 * this delays a reclaim by at most one interval and saves a query per job under load), and never in two claim steps
 * at once. A search takes over the oldest expired lease, dead-lettering rows whose lost attempt was their last.
 */
export class ExpiredLeaseSearch {
  /** When a search last came back empty (epoch ms, the library's clock: `now`). */
  private lastEmptyAt = Number.NEGATIVE_INFINITY;
  /** A search is under way: concurrent claim steps leave it to that one instead of repeating it. */
  private searching = false;

  constructor(
    private readonly intervalMs: number,
    /** One reclaim step: takes over the first expired lease among `names` (null: none). */
    private readonly takeExpired: (names: string[]) => Promise<ClaimedJob | null>,
    private readonly lastAttempts: LastAttempts,
  ) {}

  /** A search is under way now. */
  get underWay(): boolean {
    return this.searching;
  }

  /** A search is due: none under way, and none came back empty this poll interval. */
  isDue(): boolean {
    return !this.searching && now().getTime() - this.lastEmptyAt >= this.intervalMs;
  }

  /** Takes over the oldest expired lease among `names` that is not a last attempt (those are dead-lettered on the way). */
  async search(names: string[]): Promise<ClaimedJob | null> {
    this.searching = true;
    try {
      for (;;) {
        const searchedAt = now().getTime();
        const reclaimed = await this.takeExpired(names);
        if (!reclaimed) {
          // Only a search that found nothing resets the clock: while expired rows remain, keep draining them.
          this.lastEmptyAt = searchedAt;
          return null;
        }
        if (await this.lastAttempts.keepReclaimed(reclaimed, now())) return reclaimed;
      }
    } finally {
      this.searching = false;
    }
  }
}
