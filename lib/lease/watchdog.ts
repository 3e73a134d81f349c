import { MAX_TIMER_MS } from '../model/jobs.constants.js';

/**
 * Zero or one timer that calls `onExpired` once a deadline has passed. Arming replaces the timer; a deadline already
 * passed calls `onExpired` at once; a deadline beyond the platform's timer limit is reached in chunks, still one timer.
 * The timer is unref'd: a live lease never holds the process open.
 */
export class Watchdog {
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly now: () => number,
    private readonly onExpired: () => void,
  ) {}

  get armed(): boolean {
    return this.timer !== undefined;
  }

  arm(deadline: number): void {
    this.disarm();
    const remaining = deadline - this.now();
    if (remaining <= 0) {
      this.onExpired();
      return;
    }
    this.timer = setTimeout(
      () => {
        this.timer = undefined;
        this.arm(deadline);
      },
      Math.min(remaining, MAX_TIMER_MS),
    );
    this.timer.unref?.();
  }

  disarm(): void {
    if (this.timer === undefined) return;
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}
