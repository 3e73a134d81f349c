import { AsyncResource } from 'node:async_hooks';
import { MAX_TIMER_MS } from '../model/jobs.constants.js';

/** What a heartbeat clock calls when a lease's beat is due. */
export interface HeartbeatListener {
  onHeartbeat(): void;
}

/** A scheduled beat: cancel it when the lease ends or reschedules. */
export interface ScheduledBeat {
  cancel(): void;
}

/** The listeners due at one time, and the one timer that calls them. */
interface Bucket {
  readonly at: number;
  readonly listeners: Set<HeartbeatListener>;
  timer: ReturnType<typeof setTimeout> | undefined;
}

/**
 * The heartbeat timers of many leases as one: a beat due at `at` joins the most recently opened bucket when that
 * bucket fires no more than `earlyMs` before `at`, else opens a bucket of its own at exactly `at`. So a lone lease
 * beats on time, while leases that fall due together (a busy worker) share one timer and beat in the same timers
 * phase, where their renewal writes can share a round trip. Joining is O(1) and leaving is O(1): a job that ends
 * before its first beat costs no timer of its own once others are running.
 */
export class HeartbeatClock {
  private latest: Bucket | undefined;
  /**
   * The async context timers are armed in: the clock's own, not that of the job whose beat armed it. A bucket's
   * timer beats for many jobs, so it must not carry one job's trace (with OpenTelemetry, every renewal would
   * otherwise nest under whichever job's span first opened the bucket, long after that job ended).
   */
  private readonly scope = new AsyncResource('nestjs-mongo-jobs.heartbeat');

  constructor(
    private readonly now: () => number = () => Date.now(),
    /** A listener that throws (a bug) must not cost the others their beat; it is reported here. */
    private readonly onListenerError: (error: unknown) => void = (error) => void Promise.reject(error),
  ) {}

  schedule(at: number, earlyMs: number, listener: HeartbeatListener): ScheduledBeat {
    let bucket = this.latest;
    if (!bucket || bucket.timer === undefined || bucket.at > at || bucket.at < at - earlyMs) {
      bucket = { at, listeners: new Set(), timer: undefined };
      this.arm(bucket);
      this.latest = bucket;
    }
    const joined = bucket;
    joined.listeners.add(listener);
    return {
      cancel: () => {
        if (!joined.listeners.delete(listener) || joined.listeners.size > 0) return;
        // The last listener left: no wake-up for nobody.
        clearTimeout(joined.timer);
        joined.timer = undefined;
      },
    };
  }

  private arm(bucket: Bucket): void {
    // A beat is never further away than the timer limit (intervals are capped), but re-check rather than trust it.
    const delay = Math.min(Math.max(0, bucket.at - this.now()), MAX_TIMER_MS);
    bucket.timer = this.scope.runInAsyncScope(setTimeout, undefined, () => this.fire(bucket), delay);
    bucket.timer.unref?.();
  }

  private fire(bucket: Bucket): void {
    if (bucket.at > this.now()) {
      this.arm(bucket);
      return;
    }
    bucket.timer = undefined;
    for (const listener of bucket.listeners) {
      try {
        listener.onHeartbeat();
      } catch (error) {
        this.onListenerError(error);
      }
    }
    bucket.listeners.clear();
  }
}
