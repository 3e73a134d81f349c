/**
 * A sleep that can be cut short. A `wake()` while nobody sleeps is remembered, so an enqueue that
 * lands during a poll is not missed by the sleep that follows it.
 */
export class Wakeup {
  private pending = false;
  /** The sleep under way: its end (Date.now ms), what ends it now, and a way to move that end earlier. */
  private current?: { endsAt: number; end: () => void; rearm: (ms: number) => void };

  wake(): void {
    if (this.current) this.current.end();
    else this.pending = true;
  }

  /**
   * Ends the current sleep within `ms` if it would last longer (a job learnt to fall due then). Nothing while nobody
   * sleeps: the caller works out the next sleep's length from what it knows by then.
   */
  shorten(ms: number): void {
    const delay = Math.max(0, ms);
    if (this.current && Date.now() + delay < this.current.endsAt) this.current.rearm(delay);
  }

  sleep(ms: number): Promise<void> {
    if (this.pending) {
      this.pending = false;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      const end = () => {
        clearTimeout(timer);
        this.current = undefined;
        resolve();
      };
      let timer = setTimeout(end, ms);
      const current = {
        endsAt: Date.now() + ms,
        end,
        rearm: (delay: number) => {
          clearTimeout(timer);
          timer = setTimeout(end, delay);
          current.endsAt = Date.now() + delay;
        },
      };
      this.current = current;
    });
  }
}
