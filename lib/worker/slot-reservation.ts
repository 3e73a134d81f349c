/**
 * One of the process's `concurrency` slots, held for a `runNow` from before its claim until the claimed job starts in
 * it (`passToJob`) or the slot is given back unused (`release`). While held, neither the poll loop nor another
 * `runNow` can take it. Both ends are idempotent.
 */
export class SlotReservation {
  private held = true;

  /** `onEnd(freed)`: `freed` when the slot is free again (not taken by the job), so that the poll loop may use it. */
  constructor(private readonly onEnd: (freed: boolean) => void) {}

  /** Gives the slot back unused. */
  release(): void {
    this.end(true);
  }

  /** The claimed job starts in this slot now: it counts as running from here on. */
  passToJob(): void {
    this.end(false);
  }

  private end(freed: boolean): void {
    if (!this.held) return;
    this.held = false;
    this.onEnd(freed);
  }
}
