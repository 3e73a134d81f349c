import type { JobCancelledError } from '../model/errors/job-cancelled.error.js';
import type { LeaseLostError } from '../model/errors/lease-lost.error.js';
import type { LogBatch } from '../model/job-log.js';
import type { JobProgress } from '../model/job-record.js';
import type { HeartbeatClock } from './heartbeat-clock.js';

/**
 * Owner-fenced renewal write: sets `lockedUntil = max(current, requestedUntil)` (and `progress`, when given) on
 * `{_id, lockedBy, status: 'running'}`, and records the lease's `leaseMs` on the row. Resolves the row's new
 * `lockedUntil` (and appends `logs`, when given); `'cancelled'` when no row matched because the job was cancelled; `'finished'` when none matched
 * because this execution's own finishing write already ended the run (its answer is still on its way, or was lost);
 * `null` when no row matched for another reason (ownership lost). Rejects on a database error.
 */
export type LeaseRenewer = (requestedUntil: Date, progress?: JobProgress, logs?: LogBatch) => Promise<RenewalAnswer>;

/** What a {@link LeaseRenewer} resolves. */
export type RenewalAnswer = Date | null | 'cancelled' | 'finished';

/** Why an execution no longer owns its row: its lease was lost, or its job was cancelled. */
export type LeaseEnd = LeaseLostError | JobCancelledError;

/** Everything one execution's `Lease` needs; built by the runner right after the claim. */
export interface LeaseConfig {
  jobId: string;
  lockId: string;
  /** `lockedUntil` written by the claim; the first watchdog is armed for it. */
  lockedUntil: Date;
  /** When the claim was written (its `startedAt`). @default lockedUntil − leaseMs */
  claimedAt?: Date;
  /** Automatic renewal period (default lease/3 is computed by the caller). */
  heartbeatIntervalMs: number;
  /** Duration each automatic renewal asks for. */
  leaseMs: number;
  renew: LeaseRenewer;
  /**
   * Called exactly once when the execution goes stale (watchdog fired, or a renewal matched no row).
   * Never called after `Lease.close`. Must not throw (a throw is surfaced as an unhandled rejection).
   */
  onStale: (error: LeaseLostError) => void;
  /**
   * Called once when a renewal finds the job cancelled (instead of `onStale`). Not called for `Lease.cancel`,
   * nor after `Lease.close`. Must not throw.
   */
  onCancelled?: (error: JobCancelledError) => void;
  /** Called after each successful renewal with the new deadline (optional, for events). Must not throw. */
  onRenewed?: (lockedUntil: Date) => void;
  /** Called after each successful write that carried progress, with the value written (optional). Must not throw. */
  onProgress?: (progress: JobProgress) => void;
  /**
   * Owner-fenced write that moves `lockedUntil` back to `until` (never forward). Called when a renewal lands
   * after the watchdog already ended the lease: the server must agree with the watchdog, or the row would stay
   * locked for nobody until the late deadline. Optional; errors are ignored (the late deadline then stands).
   */
  relinquish?: (until: Date) => Promise<void>;
  /** Clock, defaults to `Date.now` (tests use jest fake timers, which also fake `Date.now`). */
  now?: () => number;
  /**
   * Shared by the leases of a process, so leases due together beat together (see HeartbeatClock); a lease of its
   * own when not given.
   */
  heartbeatClock?: HeartbeatClock;
}
