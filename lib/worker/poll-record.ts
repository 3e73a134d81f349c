import { now } from '../model/clock.js';
import type { PollState } from './worker-state.js';

/** What the poll loop did lately, as liveness reads it: the loop records each step here. */
export class PollRecord {
  private lastPollAt: Date | null = null;
  /** When the poll loop started: a loop still in its first poll is measured from here. */
  private loopStartedAt: Date | null = null;
  private lastError: string | null = null;
  /** Polls in a row whose claim threw (reset by any claim that did not): the loop polls on time but takes nothing. */
  private consecutiveClaimFailures = 0;

  loopStarted(): void {
    this.loopStartedAt = now();
  }

  /** A poll finished on schedule (a claim answered, nothing to claim, or every slot busy). */
  polled(): void {
    this.lastPollAt = now();
  }

  /** A claim answered, whatever it found. */
  claimAnswered(): void {
    this.consecutiveClaimFailures = 0;
  }

  /** A poll whose every claim threw. */
  claimsFailed(): void {
    this.consecutiveClaimFailures += 1;
  }

  /** Something the loop did failed (logged): the latest is reported as `lastError`. */
  failed(message: string): void {
    this.lastError = message;
  }

  state(polling: boolean, running: number): Omit<PollState, 'intervalMs'> {
    return {
      polling,
      running,
      lastPollAt: this.lastPollAt,
      progressAt: this.lastPollAt ?? this.loopStartedAt,
      lastError: this.lastError,
      consecutiveClaimFailures: this.consecutiveClaimFailures,
    };
  }
}
