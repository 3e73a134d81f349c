import type { NextDue } from '../claim/next-due.js';
import { now } from '../model/clock.js';
import type { ResolvedJobsOptions } from '../model/jobs.options.js';
import type { JobChangeFeed } from './job-change-feed.js';
import { Wakeup } from './wakeup.js';

/** A timer set for a job's `runAt` fires this much after it: a claim sent a hair early would find nothing. */
const DUE_SLACK_MS = 1;

/** What the pacing needs of the claims. */
export interface PacedClaims {
  /** When the next pending job falls due, as far as the claims know. */
  readonly nextDue: Pick<NextDue, 'known' | 'heard'>;
  /** Work may be due now: the next claim is sent without reading first, names found empty are asked again. */
  jobsArrived(): void;
}

/**
 * How long the poll loop waits between polls, and what ends a wait early. After a poll that found nothing due it
 * waits `pollIntervalMs` (`changeStreamPollIntervalMs` while the change stream is live: the poll is a safety net then),
 * or until the next pending job falls due if that is sooner; a local enqueue, a resume, a change event or a freed slot
 * wakes it at once.
 */
export class PollPacing {
  private readonly wakeup = new Wakeup();
  /** How long the latest wait was planned for (the liveness check allows for it). */
  private lastWaitMs = 0;

  constructor(
    private readonly options: Pick<
      ResolvedJobsOptions,
      'pollIntervalMs' | 'changeStreamPollIntervalMs' | 'changeStream'
    >,
    private readonly feed: JobChangeFeed,
    private readonly claims: PacedClaims,
  ) {}

  /** The longest the loop waits between polls now: `pollIntervalMs`, or its latest longer wait. */
  get intervalMs(): number {
    return Math.max(this.options.pollIntervalMs, this.lastWaitMs);
  }

  /** Opens the change stream for `names` (unless turned off): its events wake the loop, or set the timer for a later `runAt`. */
  listen(names: readonly string[]): void {
    if (!this.options.changeStream) return;
    this.feed.start(names, {
      due: () => this.workMayBeDue(),
      dueAt: (runAt) => this.dueAt(runAt),
      // Back to polling: a safety-net wait under way ends within the normal interval.
      live: (live) => live || this.wakeup.shorten(this.options.pollIntervalMs),
    });
  }

  /** Jobs stored or revived here, a name resumed, a change event: an idle loop polls at once. */
  workMayBeDue(): void {
    this.claims.jobsArrived();
    this.wakeup.wake();
  }

  /**
   * Jobs stored or revived here, due at `runAt` at the soonest (undefined: now): due now, an idle loop polls at once;
   * later, the loop's timer is set for then, with no command sent before.
   */
  arrived(runAt: Date | undefined): void {
    if (runAt && runAt.getTime() > now().getTime()) this.dueAt(runAt);
    else this.workMayBeDue();
  }

  /** A pending job falls due at `runAt`: a wait under way ends then at the latest, and the next one too. */
  private dueAt(runAt: Date): void {
    this.claims.nextDue.heard(runAt.getTime());
    this.wakeup.shorten(runAt.getTime() - now().getTime() + DUE_SLACK_MS);
  }

  /** Ends the current wait (a freed slot, shutdown); remembered when nobody waits. */
  wake(): void {
    this.wakeup.wake();
  }

  /** Waits `ms` at most. */
  wait(ms: number): Promise<void> {
    this.lastWaitMs = ms;
    return this.wakeup.sleep(ms);
  }

  /**
   * Waits after a poll that found nothing due: the poll interval, or until the next job falls due if sooner. A due
   * time that has come counts as work arrived: the next poll claims at once, names skipped as empty are asked again,
   * and the due time is spent (so a job another worker took, or a name skipped for now, never makes the loop spin).
   */
  async waitIdle(): Promise<void> {
    const { changeStreamPollIntervalMs, pollIntervalMs } = this.options;
    const interval = this.feed.live ? changeStreamPollIntervalMs : pollIntervalMs;
    const next = this.claims.nextDue.known;
    const untilDue = next === undefined ? interval : Math.max(0, next - now().getTime() + DUE_SLACK_MS);
    await this.wait(Math.min(interval, untilDue));
    const due = this.claims.nextDue.known;
    if (due !== undefined && due <= now().getTime()) this.claims.jobsArrived();
  }

  /** Shutdown: the stream closes, the loop wakes to stop. */
  stop(): void {
    void this.feed.stop();
    this.wakeup.wake();
  }
}
