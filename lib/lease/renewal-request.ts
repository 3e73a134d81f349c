import type { JobProgress } from '../model/job-record.js';

/**
 * One coalesced renewal request: what every request that joined it while it waited asked for (the longest duration,
 * the latest progress), and one promise they all share, so a burst of any size costs constant state.
 *
 * The promise carries a no-op rejection handler: a heartbeat that joins has no caller to observe a failure, and a
 * caller who awaits still gets the rejection.
 */
export class RenewalRequest {
  readonly promise: Promise<void>;
  private settle!: { resolve: () => void; reject: (reason: unknown) => void };

  constructor(
    /** Longest duration asked for, measured from the start of the write that carries it. */
    public ms: number,
    /** The latest progress asked for, if any. */
    public progress: JobProgress | undefined,
  ) {
    this.promise = new Promise<void>((resolve, reject) => {
      this.settle = { resolve, reject };
    });
    this.promise.catch(() => undefined);
  }

  /** Joins another request to this one while it waits (the longest duration and the latest progress win). */
  join(ms: number, progress: JobProgress | undefined): Promise<void> {
    if (ms > this.ms) this.ms = ms;
    if (progress !== undefined) this.progress = progress;
    return this.promise;
  }

  resolve(): void {
    this.settle.resolve();
  }

  reject(reason: unknown): void {
    this.settle.reject(reason);
  }
}
