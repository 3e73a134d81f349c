import { defer, exhaustMap, finalize, Subject, Subscription } from 'rxjs';
import { InvalidDurationError } from '../errors/invalid-duration.error.js';
import { JobCancelledError } from '../errors/job-cancelled.error.js';
import { LeaseLostError } from '../errors/lease-lost.error.js';
import { MAX_TIMER_MS } from '../jobs.constants.js';
import type { JobProgress } from '../persistence/job.types.js';
import { isDuration } from '../utils/validate.js';
import { HeartbeatClock, type HeartbeatListener, type ScheduledBeat } from './heartbeat-clock.js';
import { lockExtensionError } from './lock-extension.js';

/**
 * Owner-fenced renewal write: sets `lockedUntil = max(current, requestedUntil)` (and `progress`, when given) on
 * `{_id, lockedBy, status: 'running'}`, and records the lease's `leaseMs` on the row. Resolves the row's new
 * `lockedUntil`; `'cancelled'` when no row matched because the job was cancelled; `'finished'` when none matched
 * because this execution's own finishing write already ended the run (its answer is still on its way, or was lost);
 * `null` when no row matched for another reason (ownership lost). Rejects on a database error.
 */
export type LeaseRenewer = (
  requestedUntil: Date,
  progress?: JobProgress,
) => Promise<Date | null | 'cancelled' | 'finished'>;

/** Why an execution no longer owns its row: its lease was lost, or its job was cancelled. */
export type LeaseEnd = LeaseLostError | JobCancelledError;

/** Everything one execution's {@link Lease} needs; built by the runner right after the claim. */
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
   * Never called after {@link Lease.close}. Must not throw (a throw is surfaced as an unhandled rejection).
   */
  onStale: (error: LeaseLostError) => void;
  /**
   * Called once when a renewal finds the job cancelled (instead of `onStale`). Not called for {@link Lease.cancel},
   * nor after {@link Lease.close}. Must not throw.
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

/** Diagnostics for tests and benchmarks. */
export interface LeaseStats {
  /** Renewal writes started so far. */
  writes: number;
  /** Highest number of renewal writes ever in flight at once (1 when the pipeline is single-flight). */
  maxInFlight: number;
  /** Whether a watchdog timer is currently armed. */
  watchdogArmed: boolean;
}

/**
 * One coalesced renewal request. Every caller that joins it while it waits shares this single
 * promise, so the state stays constant-size whatever the size of the burst.
 */
interface RenewalRequest {
  /** Longest duration asked for by the callers that joined (mutated only while the request waits). */
  ms: number;
  /** The latest progress asked for by the callers that joined, if any (mutated only while the request waits). */
  progress: JobProgress | undefined;
  readonly promise: Promise<void>;
  readonly resolve: () => void;
  readonly reject: (reason: unknown) => void;
  /** A no-op rejection handler is attached (the heartbeat has no caller to observe a failure). */
  guarded: boolean;
}

function createRequest(ms: number): RenewalRequest {
  let resolve!: () => void;
  let reject!: (reason: unknown) => void;
  const promise = new Promise<void>((onResolve, onReject) => {
    resolve = onResolve;
    reject = onReject;
  });
  return { ms, progress: undefined, promise, resolve, reject, guarded: false };
}

const ignore = (): void => {};

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
 * The lease of one execution: a single-flight, coalescing renewal pipeline plus a watchdog.
 *
 * - Every renewal request (the automatic heartbeat every `heartbeatIntervalMs`, and every
 *   {@link Lease.extend}) goes into one pending slot; while it waits, the longest duration wins.
 *   A `Subject` trigger feeds `exhaustMap`, so exactly one owner-fenced write is in flight at any
 *   moment and a burst of any size causes at most one follow-up write. The pipeline is built at the first
 *   request: a job that ends before its first renewal never builds one.
 * - Heartbeats come from a {@link HeartbeatClock} shared by the process's leases (no timer per lease), up to
 *   a tenth of the interval early when that lets them beat with others.
 * - A write asks for `renewalStartedAt + ms`, where `renewalStartedAt` is when the write starts. None is sent once the
 *   deadline has passed; a write that fails is retried after a short backoff (50 ms doubling, at most a quarter
 *   interval and 1 s) by bringing the next beat forward, while the deadline is ahead.
 * - The watchdog is zero or one timer. It is armed at the first beat (which comes before the claim's
 *   deadline), or at start when the first beat would not, and re-armed after each successful renewal for
 *   `lockedUntil - now()`, so database latency eats into the lease. A renewal in flight never
 *   disarms it: a hung renewal still lets the execution go stale at the old deadline.
 * - Terminal states win: after {@link Lease.close} or stale, nothing is written and no timer is
 *   armed, whatever is still in flight; a late write result is ignored.
 */
export class Lease implements HeartbeatListener {
  private readonly now: () => number;
  /** The single-flight pipeline, built at the first renewal request. */
  private pipeline: { trigger: Subject<void>; subscription: Subscription } | undefined;
  private clock: HeartbeatClock | undefined;
  /** The next beat on the heartbeat clock (one at a time), and when it is due. */
  private heartbeat: ScheduledBeat | undefined;
  private nextBeatAt = Number.POSITIVE_INFINITY;
  /** Renewal writes that failed in a row (reset by one that lands): the retry backoff. */
  private failedInARow = 0;
  private watchdog: ReturnType<typeof setTimeout> | undefined;
  private deadline: number;
  /** The coalescing slot: at most one request waits for a write. */
  private pending: RenewalRequest | null = null;
  /** The request whose write is in flight, so a terminal state can settle it without waiting. */
  private writing: RenewalRequest | null = null;
  private started = false;
  private closed = false;
  /** Set by stopRenewing(): the lease is left to run out at its current deadline. */
  private renewalsStopped = false;
  private handedBack = false;
  private lostPromise: Promise<LeaseEnd> | undefined;
  private resolveLost: (error: LeaseEnd) => void = ignore;
  private staleError: LeaseEnd | null = null;
  /** The lease the row records for this execution: the claim's until a renewal (which records ours) has landed. */
  private recordedMs: number;
  private writeCount = 0;
  private inFlight = 0;
  private maxInFlight = 0;

  constructor(private readonly config: LeaseConfig) {
    if (!isDuration(config.heartbeatIntervalMs)) {
      throw new InvalidDurationError('heartbeatIntervalMs', config.heartbeatIntervalMs);
    }
    if (!isDuration(config.leaseMs)) throw new InvalidDurationError('leaseMs', config.leaseMs);
    // Looked up at call time, so a clock faked after construction is still honoured.
    this.now = config.now ?? (() => Date.now());
    this.deadline = config.lockedUntil.getTime();
    const claimedAt = config.claimedAt?.getTime();
    this.recordedMs = claimedAt === undefined ? config.leaseMs : Math.min(config.leaseMs, this.deadline - claimedAt);
  }

  /**
   * Resolves with the error that ended the lease when it is lost or its job is cancelled; never settles if the lease
   * closes first.
   */
  get lost(): Promise<LeaseEnd> {
    this.lostPromise ??= this.staleError
      ? Promise.resolve(this.staleError)
      : new Promise((resolve) => {
          this.resolveLost = resolve;
        });
    return this.lostPromise;
  }

  /**
   * Schedules the first beat, and arms the watchdog for `config.lockedUntil` unless that beat comes first (it then
   * arms it). No-op if repeated.
   */
  start(): void {
    if (this.started || this.isTerminal) return;
    this.started = true;
    const { heartbeatIntervalMs, leaseMs } = this.config;
    const interval = this.interval;
    // The lease began at the claim, not now, so the time the claim's answer took (and any wait before the handler
    // starts) does not eat into the first period. The claim may have written a shorter lease than ours (the module's,
    // before it knew the handler): the first renewal comes at the same fraction of that lease, and asks for ours.
    const claimedAt = this.config.claimedAt?.getTime() ?? this.deadline - leaseMs;
    const firstPeriod = Math.min(interval, ((this.deadline - claimedAt) * heartbeatIntervalMs) / leaseMs);
    const now = this.now();
    const firstBeatAt = now + Math.min(Math.max(0, claimedAt + firstPeriod - now), interval);
    // A deadline already passed goes stale here; one the first beat would miss needs its watchdog now.
    if (this.deadline <= now || firstBeatAt >= this.deadline || this.renewalsStopped) this.armWatchdog();
    if (this.isTerminal || this.renewalsStopped) return;
    this.scheduleBeat(firstBeatAt);
  }

  /** Called by the heartbeat clock: arms the watchdog if this is the first beat, renews, schedules the next. */
  onHeartbeat(): void {
    this.heartbeat = undefined;
    this.nextBeatAt = Number.POSITIVE_INFINITY;
    if (this.isTerminal || this.renewalsStopped) return;
    if (this.watchdog === undefined) this.armWatchdog();
    if (this.isTerminal) return;
    this.scheduleBeat(this.now() + this.interval);
    this.beat();
  }

  /**
   * Requests a renewal for `ms` milliseconds from the moment the covering write starts.
   *
   * - Rejects with {@link InvalidDurationError} (and writes nothing) unless `ms` is finite and > 0.
   * - Resolves when the write covering this request lands.
   * - Rejects with the original database error object if that write fails; every caller that joined
   *   the same write gets the same object. The lease stays live until its current deadline.
   * - Rejects with {@link LeaseLostError} if the execution is or becomes stale before the write lands.
   * - After {@link Lease.close} (the job is done, there is nothing to extend), requests that were
   *   not yet written, or still in flight, resolve without any further write.
   */
  extend(ms: number): Promise<void> {
    const invalid = lockExtensionError(ms);
    if (invalid) return Promise.reject(invalid);
    if (this.staleError) return Promise.reject(this.staleError);
    if (this.closed) return Promise.resolve();
    if (this.renewalsStopped) {
      return Promise.reject(new LeaseLostError(this.config.jobId, this.config.lockId, 'expired'));
    }
    return this.enqueue(ms).promise;
  }

  /**
   * Writes `progress` (already validated) with the next renewal: it joins the waiting request, where the latest value
   * wins, or opens one asking for a full `leaseMs` (the same write renews the lease, for free). Never more than one
   * write in flight, so a burst of any size costs at most one follow-up write. Settles as {@link Lease.extend} does:
   * resolves when the covering write lands, and without writing after {@link Lease.close}; rejects with
   * {@link LeaseLostError} once the execution is stale or its renewals stopped, or with the database error.
   */
  updateProgress(progress: JobProgress): Promise<void> {
    if (this.staleError) return Promise.reject(this.staleError);
    if (this.closed) return Promise.resolve();
    if (this.renewalsStopped) {
      return Promise.reject(new LeaseLostError(this.config.jobId, this.config.lockId, 'expired'));
    }
    return this.enqueue(this.config.leaseMs, progress).promise;
  }

  /**
   * Stops every further renewal (heartbeat and extend) but keeps the watchdog: the lease runs out at its current
   * deadline and then goes stale as usual. For a handler that ignores its abort: its row is then taken over like a
   * crashed worker's, and never earlier. A write already in flight may still land.
   */
  stopRenewing(): void {
    if (this.renewalsStopped || this.isTerminal) return;
    this.renewalsStopped = true;
    this.stopHeartbeat();
    // No beat will arm it now; the lease must still run out at its deadline.
    if (this.watchdog === undefined) this.armWatchdog();
    if (this.isTerminal) return;
    const pending = this.pending;
    this.pending = null;
    pending?.reject(new LeaseLostError(this.config.jobId, this.config.lockId, 'expired'));
  }

  /**
   * Ends the lease because its job was cancelled (the row is no longer this execution's): nothing more is written,
   * and every outstanding and later `extend`/`updateProgress` rejects with `reason`. No-op once closed or stale.
   */
  cancel(reason: JobCancelledError): void {
    this.end(reason);
  }

  /** Current deadline (never moves backwards). */
  get expiresAt(): Date {
    return new Date(this.deadline);
  }

  /**
   * The lease the row records for this execution (`leaseMs`): the claim's until one of this lease's renewals has
   * landed, ours from then on. A cancel raises the row's deadline by it, so a cancelled handler may take this long
   * to settle and no longer.
   */
  get recordedLeaseMs(): number {
    return this.recordedMs;
  }

  /** True once the execution no longer owns its row: its lease was lost, or its job was cancelled. */
  get isStale(): boolean {
    return this.staleError !== null;
  }

  /** The job was cancelled: by {@link Lease.cancel}, or as a renewal found it. */
  get isCancelled(): boolean {
    return this.staleError instanceof JobCancelledError;
  }

  /**
   * Terminal: the execution finished. Stops the heartbeat and disarms the watchdog permanently;
   * nothing is written or armed afterwards, whatever is in flight. Outstanding requests resolve.
   * Idempotent; after stale it changes nothing.
   */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.staleError) return; // already torn down and settled
    this.teardown();
    this.settleOutstanding((request) => request.resolve());
  }

  /** Diagnostics for tests and benchmarks. */
  get stats(): LeaseStats {
    return { writes: this.writeCount, maxInFlight: this.maxInFlight, watchdogArmed: this.watchdog !== undefined };
  }

  private get isTerminal(): boolean {
    return this.closed || this.staleError !== null;
  }

  /** Joins the waiting request (longest duration, latest progress win) or opens one and triggers the pipeline. */
  private enqueue(ms: number, progress?: JobProgress): RenewalRequest {
    const pending = this.pending;
    if (pending) {
      if (ms > pending.ms) pending.ms = ms;
      if (progress !== undefined) pending.progress = progress;
      return pending;
    }
    const request = createRequest(ms);
    request.progress = progress;
    this.pending = request;
    // exhaustMap ignores this while a write is in flight; that write's follow-up picks the request up.
    this.trigger().next();
    return request;
  }

  private trigger(): Subject<void> {
    if (!this.pipeline) {
      const trigger = new Subject<void>();
      const subscription = trigger
        .pipe(exhaustMap(() => defer(() => this.write()).pipe(finalize(() => this.scheduleFollowUp()))))
        .subscribe();
      this.pipeline = { trigger, subscription };
    }
    return this.pipeline.trigger;
  }

  private get interval(): number {
    return Math.min(this.config.heartbeatIntervalMs, MAX_TIMER_MS);
  }

  private scheduleBeat(at: number): void {
    this.clock ??= this.config.heartbeatClock ?? new HeartbeatClock(this.now);
    this.heartbeat = this.clock.schedule(at, this.interval * BEAT_EARLY_FRACTION, this);
    this.nextBeatAt = at;
  }

  /**
   * A renewal failed and the lease is still live: brings the next beat forward to after a short backoff (still one
   * beat on the shared clock, so leases that failed together retry together, in one round trip). Nothing to do when
   * the next beat comes first, or when the wait would end past the deadline (the watchdog decides then).
   */
  private retrySoon(): void {
    if (this.isTerminal || this.renewalsStopped) return;
    this.failedInARow += 1;
    const maxWaitMs = Math.min(RENEWAL_RETRY_MAX_MS, this.interval * RENEWAL_RETRY_MAX_FRACTION);
    const waitMs = Math.min(RENEWAL_RETRY_BASE_MS * 2 ** (this.failedInARow - 1), maxWaitMs);
    const at = this.now() + waitMs;
    if (at >= this.deadline || (this.heartbeat !== undefined && this.nextBeatAt <= at)) return;
    this.stopHeartbeat();
    this.scheduleBeat(at);
  }

  private beat(): void {
    if (this.isTerminal || this.renewalsStopped) return;
    const request = this.enqueue(this.config.leaseMs);
    // Nobody awaits the heartbeat; guard once per request, so ticks during a hung write add nothing.
    if (!request.guarded) {
      request.guarded = true;
      request.promise.catch(ignore);
    }
  }

  /**
   * exhaustMap drops triggers until its inner subscription is released, and `finalize` runs while it
   * is being released: one microtask later exhaustMap is free, so a request that arrived during the
   * write or while it was settling (e.g. from a caller's `.then`) is written, not lost. If another
   * write has started meanwhile, this trigger is dropped and that write's own follow-up takes over.
   * A native promise, not `queueMicrotask`: jest fake timers fake the latter.
   */
  private scheduleFollowUp(): void {
    void Promise.resolve().then(() => {
      if (this.pending && !this.isTerminal) this.pipeline?.trigger.next();
    });
  }

  /** The single in-flight write. Never rejects: every outcome is settled on the request itself. */
  private async write(): Promise<void> {
    const request = this.pending;
    if (!request || this.isTerminal) return;
    // The owner never sends a renewal past its own deadline (its watchdog ends the lease there), so the write's fence
    // needs only the lock: one sent before the deadline is applied even when it reaches the server after it.
    if (this.now() >= this.deadline) {
      this.goStale('expired'); // rejects this request
      return;
    }
    this.pending = null;
    this.writing = request;
    // Measured when the write starts, not when it was requested: a queued request gains nothing.
    const requestedUntil = new Date(this.now() + request.ms);
    this.writeCount += 1;
    this.inFlight += 1;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    let lockedUntil: Date | null | 'cancelled' | 'finished';
    try {
      lockedUntil = await this.config.renew(requestedUntil, request.progress);
    } catch (error) {
      this.inFlight -= 1;
      // Terminal states already settled this request; a late result changes nothing.
      if (this.isTerminal) return;
      this.writing = null;
      // Still live until the current deadline: retried shortly (see retrySoon), else the watchdog fires.
      request.reject(error);
      this.retrySoon();
      return;
    }
    this.inFlight -= 1;
    if (lockedUntil === 'finished') {
      // Not lost: the run ended by this execution's own write. Nothing is left to renew or to watch.
      this.close();
      return;
    }
    if (this.isTerminal) {
      if (this.staleError && lockedUntil instanceof Date && lockedUntil.getTime() > this.deadline) this.handBack();
      return;
    }
    if (lockedUntil === 'cancelled') {
      const reason = new JobCancelledError(this.config.jobId);
      this.end(reason); // rejects this request
      const { onCancelled } = this.config;
      if (onCancelled) this.notify(() => onCancelled(reason));
      return;
    }
    if (lockedUntil === null) {
      // No match: the lock no longer holds the row (reclaimed, cancelled); expired when that happened past the deadline.
      this.goStale(this.now() >= this.deadline ? 'expired' : 'taken-over'); // rejects this request
      return;
    }
    this.writing = null;
    this.recordedMs = this.config.leaseMs;
    this.failedInARow = 0;
    this.deadline = Math.max(this.deadline, lockedUntil.getTime());
    this.armWatchdog();
    if (this.isTerminal) {
      // The renewal landed after its own deadline: it cannot keep the execution alive.
      request.reject(this.staleError);
      return;
    }
    request.resolve();
    const { onRenewed, onProgress } = this.config;
    if (onRenewed) this.notify(() => onRenewed(new Date(this.deadline)));
    const progress = request.progress;
    if (onProgress && progress !== undefined) this.notify(() => onProgress(progress));
  }

  /** Replaces the (zero or one) watchdog timer with one for the current deadline; stale once it has passed. */
  private armWatchdog(): void {
    this.disarmWatchdog();
    const remaining = this.deadline - this.now();
    if (remaining <= 0) {
      this.goStale('expired');
      return;
    }
    // Still exactly one timer: a deadline beyond the timer limit is reached in chunks, re-checked each time.
    const timer = setTimeout(
      () => {
        this.watchdog = undefined;
        this.armWatchdog();
      },
      Math.min(remaining, MAX_TIMER_MS),
    );
    timer.unref?.();
    this.watchdog = timer;
  }

  private disarmWatchdog(): void {
    if (this.watchdog === undefined) return;
    clearTimeout(this.watchdog);
    this.watchdog = undefined;
  }

  /** Stale exactly once: tear everything down, reject every outstanding caller, then tell the runner. */
  private goStale(reason: LeaseLostError['reason']): void {
    if (this.isTerminal) return;
    const error = new LeaseLostError(this.config.jobId, this.config.lockId, reason);
    this.end(error);
    this.notify(() => this.config.onStale(error));
  }

  /** Ends the lease once (lost or cancelled): tear everything down, reject every outstanding caller with `error`. */
  private end(error: LeaseEnd): void {
    if (this.isTerminal) return;
    this.staleError = error;
    this.teardown();
    this.settleOutstanding((request) => request.reject(error));
    this.resolveLost(error);
  }

  /** A renewal moved the row's deadline past the one the watchdog ended: move it back, once, best effort. */
  private handBack(): void {
    const relinquish = this.config.relinquish;
    if (!relinquish || this.handedBack) return;
    this.handedBack = true;
    relinquish(new Date(this.deadline)).catch(ignore);
  }

  private stopHeartbeat(): void {
    this.heartbeat?.cancel();
    this.heartbeat = undefined;
    this.nextBeatAt = Number.POSITIVE_INFINITY;
  }

  /** No timer, subscription or listener outlives the execution. */
  private teardown(): void {
    this.stopHeartbeat();
    this.disarmWatchdog();
    this.pipeline?.subscription.unsubscribe();
    this.pipeline?.trigger.complete();
  }

  private settleOutstanding(settle: (request: RenewalRequest) => void): void {
    const { writing, pending } = this;
    this.writing = null;
    this.pending = null;
    if (writing) settle(writing);
    if (pending) settle(pending);
  }

  /** A throwing listener must not corrupt the lease or kill its pipeline; surface it as an unhandled rejection. */
  private notify(listener: () => void): void {
    try {
      listener();
    } catch (error) {
      void Promise.reject(error);
    }
  }
}
