import type { PollPacing } from './poll-pacing.js';

/** The longest a claim in a backlog waits for slots about to free; a slot finishing for longer is not about to. */
export const GATHER_MAX_MS = 50;

/**
 * Slots about to free: executions whose handler has settled and whose outcome write went out less than
 * `GATHER_MAX_MS` ago (one round trip, normally). In a backlog a claim waits for them rather than take fewer jobs now,
 * so jobs that ended together are claimed together, in one batch, and their outcomes go out in one bulk. Without it a
 * worker whose slots once split into groups (a burst's opening single claim, then a batch for the rest) keeps claiming
 * and completing each group apart for as long as the backlog lasts: at concurrency 16, 0.37 commands a job instead
 * of 0.25. A slot finishing for longer (its outcome write retrying through faults) no longer counts: else every claim
 * into the free slots would wait the full bound for as long as the database refuses that write.
 */
export class FinishingSlots {
  /** Each finishing slot, by its execution, with when its handler settled; in that order (a Map keeps it). */
  private readonly since = new Map<object, number>();

  constructor(
    private readonly pacing: Pick<PollPacing, 'wait'>,
    /** A monotonic clock (ms): the wall clock may step back. */
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** The handler of `execution` settled: its slot frees once its outcome is written. */
  handlerSettled(execution: object): void {
    this.since.set(execution, this.now());
  }

  /** The slot of `execution` freed (whether its handler settled or not). */
  freed(execution: object): void {
    this.since.delete(execution);
  }

  /**
   * Before a batch step: first one turn, so that handlers the last claim started and already done count as
   * finishing; then, while more slots are about to free than `room()` are free, until a slot frees (the freed slot
   * wakes the poll pacing), `GATHER_MAX_MS` at most. `busy`: slots running a job now (none: nothing can be finishing).
   */
  async gather(busy: number, room: () => number, stopping: () => boolean): Promise<void> {
    if (busy === 0) return;
    await new Promise<void>((resolve) => setImmediate(resolve));
    const until = this.now() + GATHER_MAX_MS;
    while (!stopping() && this.aboutToFree() > room() && this.now() < until) await this.pacing.wait(until - this.now());
  }

  /** Finishing slots whose outcome write went out less than `GATHER_MAX_MS` ago. */
  private aboutToFree(): number {
    const cutoff = this.now() - GATHER_MAX_MS;
    let stale = 0;
    // In settling order: the stale ones come first.
    for (const settledAt of this.since.values()) {
      if (settledAt > cutoff) break;
      stale += 1;
    }
    return this.since.size - stale;
  }
}
