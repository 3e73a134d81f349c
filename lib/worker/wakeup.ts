/**
 * A sleep that can be cut short. A `wake()` while nobody sleeps is remembered, so an enqueue that
 * lands during a poll is not missed by the sleep that follows it.
 */
export class Wakeup {
  private pending = false;
  private wakeCurrent?: () => void;

  wake(): void {
    if (this.wakeCurrent) this.wakeCurrent();
    else this.pending = true;
  }

  sleep(ms: number): Promise<void> {
    if (this.pending) {
      this.pending = false;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      const self = this;
      function done() {
        clearTimeout(timer);
        self.wakeCurrent = undefined;
        resolve();
      }
      this.wakeCurrent = done;
    });
  }
}
