import { type IntervalHistogram, monitorEventLoopDelay } from 'node:perf_hooks';

/**
 * A lease test with a lease of a few hundred milliseconds proves that the heartbeat keeps a live worker's lease. A
 * worker whose process did not run for longer than the lease's slack is not live: losing its lease then is the
 * protocol working, not a break. This watches the test process's event loop (where the test's workers run) so that
 * such a test can tell the two apart: a failure with a stall past the slack is a run whose precondition did not happen
 * (retried with `untilPreconditionReached`); a failure without one fails the test.
 */
export class EventLoopStalls {
  private readonly histogram: IntervalHistogram = monitorEventLoopDelay({ resolution: 10 });

  constructor() {
    this.histogram.enable();
  }

  /** Stops watching; answers the longest delay seen, in milliseconds. */
  stop(): number {
    this.histogram.disable();
    return Math.round(this.histogram.max / 1e6);
  }
}
