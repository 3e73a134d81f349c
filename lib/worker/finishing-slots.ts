import type { PollPacing } from './poll-pacing.js';

/** The longest a claim in a backlog waits for slots about to free. */
export const GATHER_MAX_MS = 50;

/**
 * Slots about to free: executions whose handler has settled and whose outcome write is under way (one round trip,
 * unless the write retries through faults). In a backlog a claim waits for them rather than take fewer jobs now, so
 * jobs that ended together are claimed together, in one batch, and their outcomes go out in one bulk. Without it a
 * worker whose slots once split into groups (a burst's opening single claim, then a batch for the rest) keeps claiming
 * and completing each group apart for as long as the backlog lasts: at concurrency 16, 0.37 commands a job instead
 * of 0.25.
 */
export class FinishingSlots {
  private finishing = 0;

  constructor(private readonly pacing: Pick<PollPacing, 'wait'>) {}

  /** An execution's handler settled: its slot frees once its outcome is written. */
  handlerSettled(): void {
    this.finishing += 1;
  }

  /** A slot counted by `handlerSettled` freed. */
  freed(): void {
    this.finishing -= 1;
  }

  /**
   * Before a batch step: first one turn, so that handlers the last claim started and already done count as
   * finishing; then, while more slots are finishing than `room()` are free, until a slot frees (the freed slot
   * wakes the poll pacing), `GATHER_MAX_MS` at most: an outcome write retrying through faults must not hold the free
   * slots idle. `busy`: slots running a job now (none: nothing can be finishing).
   */
  async gather(busy: number, room: () => number, stopping: () => boolean): Promise<void> {
    if (busy === 0) return;
    await new Promise<void>((resolve) => setImmediate(resolve));
    const until = Date.now() + GATHER_MAX_MS;
    while (!stopping() && this.finishing > room() && Date.now() < until) await this.pacing.wait(until - Date.now());
  }
}
