/** In the claim order of a process with limited names, every name without fleet-wide limits, claimed together. */
export const UNLIMITED = Symbol('unlimited names');

/** A limited name, or the unlimited names as one. */
export type ClaimEntry = string | typeof UNLIMITED;

/**
 * When a process with limited names skips a claim, until the next poll interval, like an empty poll does:
 * - a limited name found at its limit (`markFull`), until one of its executions here ends (`slotFreed`);
 * - a limited name, or the unlimited names, found with nothing due (`markEmpty`), until a job is enqueued here
 *   (`jobsArrived`). A claim that began before an arrival does not mark: its read may predate the new job.
 * Also when each limited name's expired leases are next searched for: once per poll interval, however many of its
 * claims are in flight.
 */
export class ClaimSkips {
  private readonly fullUntil = new Map<string, number>();
  private readonly emptyUntil = new Map<ClaimEntry, number>();
  private readonly reclaimSearchedAt = new Map<string, number>();
  private arrived = 0;

  constructor(private readonly pollIntervalMs: number) {}

  /** Counts `jobsArrived` calls: read it when a claim begins, hand it to `markEmpty` when the claim found nothing. */
  get arrivals(): number {
    return this.arrived;
  }

  isSkipped(entry: ClaimEntry, at = Date.now()): boolean {
    const until = Math.max(
      typeof entry === 'string' ? (this.fullUntil.get(entry) ?? 0) : 0,
      this.emptyUntil.get(entry) ?? 0,
    );
    return until > at;
  }

  markFull(name: string): void {
    this.fullUntil.set(name, Date.now() + this.pollIntervalMs);
  }

  markEmpty(entry: ClaimEntry, arrivalsAtStart: number): void {
    if (this.arrived === arrivalsAtStart) this.emptyUntil.set(entry, Date.now() + this.pollIntervalMs);
  }

  slotFreed(name: string): void {
    this.fullUntil.delete(name);
  }

  jobsArrived(): void {
    this.arrived += 1;
    this.emptyUntil.clear();
  }

  /** True (and the search counted as started now) when `name`'s expired leases are due to be searched for. */
  startReclaimSearch(name: string): boolean {
    const now = Date.now();
    if (now - (this.reclaimSearchedAt.get(name) ?? Number.NEGATIVE_INFINITY) < this.pollIntervalMs) return false;
    this.reclaimSearchedAt.set(name, now);
    return true;
  }

  /** A search found an expired lease: more may be, so the next claim of `name` searches again. */
  reclaimFound(name: string): void {
    this.reclaimSearchedAt.delete(name);
  }
}
