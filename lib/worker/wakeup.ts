/**
 * A sleep that can be cut short. A `wake()` while nobody sleeps is remembered, so an enqueue that
 * lands during a poll is not missed by the sleep that follows it.
 */
export class Wakeup {
  private pending = false;
  private wakeCurrent?: () => void;
  /** The current sleep's end (Date.now ms) and a way to move it earlier. */
  private current?: { endsAt: number; rearm: (ms: number) => void };

  wake(): void {
    if (this.wakeCurrent) this.wakeCurrent();
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
      let timer = setTimeout(done, ms);
      const self = this;
      function done() {
        clearTimeout(timer);
        self.wakeCurrent = undefined;
        self.current = undefined;
        resolve();
      }
      this.wakeCurrent = done;
      this.current = {
        endsAt: Date.now() + ms,
        rearm: (delay) => {
          clearTimeout(timer);
          timer = setTimeout(done, delay);
          if (this.current) this.current.endsAt = Date.now() + delay;
        },
      };
    });
  }
}
