import { MAX_TIMER_MS } from '../model/jobs.constants.js';
import type { HeartbeatClock, HeartbeatListener, ScheduledBeat } from './heartbeat-clock.js';

/** A beat may run this fraction of its interval early, to share a timer and a round trip with others due then. */
const BEAT_EARLY_FRACTION = 0.1;
/**
 * A failed renewal is sent again after 50 ms, doubling, at most a quarter of the interval and 1 s: an error window
 * costs a lease only the time it lasts plus one such wait, not the rest of a heartbeat interval.
 */
const RENEWAL_RETRY_BASE_MS = 50;
const RENEWAL_RETRY_MAX_MS = 1_000;
const RENEWAL_RETRY_MAX_FRACTION = 0.25;

/**
 * One lease's beats on the process's heartbeat clock: at most one scheduled at a time, every interval, brought forward
 * after a failed renewal. A beat comes up to a tenth of the interval early when that lets it share a timer (and, through
 * the renewal batcher, a round trip) with the beats of other leases.
 */
export class LeaseBeats implements HeartbeatListener {
  /** The heartbeat period actually used: the configured one, capped at the platform's timer limit. */
  readonly interval: number;
  private next: { at: number; beat: ScheduledBeat } | undefined;
  /** Renewals that failed in a row (reset by one that lands): the retry backoff. */
  private failedInARow = 0;

  constructor(
    private readonly clock: HeartbeatClock,
    private readonly heartbeatIntervalMs: number,
    private readonly now: () => number,
    private readonly onBeat: () => void,
  ) {
    this.interval = Math.min(heartbeatIntervalMs, MAX_TIMER_MS);
  }

  /** Called by the clock. */
  onHeartbeat(): void {
    this.next = undefined;
    this.onBeat();
  }

  /** Schedules the beat for `at`, in place of the one scheduled, if any. */
  schedule(at: number): void {
    this.stop();
    this.next = { at, beat: this.clock.schedule(at, this.interval * BEAT_EARLY_FRACTION, this) };
  }

  stop(): void {
    this.next?.beat.cancel();
    this.next = undefined;
  }

  /** A renewal landed: the backoff starts over. */
  landed(): void {
    this.failedInARow = 0;
  }

  /**
   * A renewal failed: the next beat comes after a short backoff (still one beat on the shared clock, so leases that
   * failed together retry together, in one round trip), unless the scheduled one comes first or the wait would end at
   * or past `deadline` (the watchdog decides then).
   */
  failed(deadline: number): void {
    this.failedInARow += 1;
    const maxWaitMs = Math.min(RENEWAL_RETRY_MAX_MS, this.interval * RENEWAL_RETRY_MAX_FRACTION);
    const at = this.now() + Math.min(RENEWAL_RETRY_BASE_MS * 2 ** (this.failedInARow - 1), maxWaitMs);
    if (at < deadline && (this.next?.at ?? Number.POSITIVE_INFINITY) > at) this.schedule(at);
  }

  /**
   * When the first beat is due. The lease began at the claim, not now, so the time the claim's answer took (and any
   * wait before the handler starts) does not eat into the first period. The claim may have written a shorter lease than
   * ours (the module's, before it knew the handler): the first renewal comes at the same fraction of that lease, and
   * asks for ours. Never before now, never more than one interval after it.
   */
  firstBeatAt(claimedAt: number, deadline: number, leaseMs: number): number {
    const now = this.now();
    const claimPeriod = ((deadline - claimedAt) * this.heartbeatIntervalMs) / leaseMs;
    return now + Math.min(Math.max(0, claimedAt + Math.min(this.interval, claimPeriod) - now), this.interval);
  }
}
