import { defer, EMPTY, exhaustMap, of, repeat, Subject } from 'rxjs';
import { InvalidDurationError } from '../model/errors/invalid-duration.error.js';
import { JobCancelledError } from '../model/errors/job-cancelled.error.js';
import { LeaseLostError } from '../model/errors/lease-lost.error.js';
import type { JobLogLine, LogBatch } from '../model/job-log.js';
import type { JobProgress } from '../model/job-record.js';
import { isDuration } from '../model/validate.js';
import { HeartbeatClock } from './heartbeat-clock.js';
import { LeaseBeats } from './lease-beats.js';
import type { LeaseConfig, LeaseEnd, RenewalAnswer } from './lease-config.js';
import { lockExtensionError } from './lock-extension.js';
import { LogBuffer } from './log-buffer.js';
import { RenewalRequest } from './renewal-request.js';
import { Watchdog } from './watchdog.js';

export type { LeaseConfig, LeaseEnd, LeaseRenewer, RenewalAnswer } from './lease-config.js';

enum State {
  Created, // not started: requests are written, no beat is scheduled
  Renewing, // started: the heartbeat renews
  RunningOut, // stopRenewing(): nothing more is sent, the watchdog ends the lease at its deadline
  Closed, // terminal: the execution finished
  Ended, // terminal: lost or cancelled (endedBy)
}

/**
 * The lease of one execution: a single-flight, coalescing renewal pipeline plus a watchdog.
 *
 * - Requests (beats, {@link Lease.extend}, {@link Lease.updateProgress}) join the one waiting {@link RenewalRequest}
 *   (longest duration, latest progress; one shared promise) or open it and wake one `Subject`. `exhaustMap` runs one
 *   write at a time; its inner observable `repeat`s while a request waits, so what coalesced during a write goes in
 *   exactly one follow-up. Deciding to stop and freeing `exhaustMap` are one synchronous step: no request falls between.
 *   The pipeline is built at the first request: a job that ends before its first renewal never builds one.
 * - Beats come from the process's shared {@link HeartbeatClock} (see {@link LeaseBeats}); `renew` batches their writes.
 * - A write asks for `when the write starts + ms`. None is sent once the deadline has passed; a failed write is retried
 *   after a short backoff by bringing the next beat forward, while the deadline is ahead.
 * - The watchdog is zero or one timer, armed at the first beat (or at start when that beat would come after the
 *   claim's deadline) and after each successful renewal for `lockedUntil - now()`: database latency eats into the
 *   lease. A renewal in flight never disarms it: a hung renewal still goes stale at the old deadline.
 * - Terminal states win: after {@link Lease.close} or stale nothing is written or armed, whatever is in flight, and a
 *   late result is ignored, except that a renewal landing after the watchdog ended the lease is handed back.
 */
export class Lease {
  private state = State.Created;
  private endedBy: LeaseEnd | undefined;
  private deadline: number;
  /** The lease the row records for this execution: the claim's until a renewal (which records ours) has landed. */
  private recordedMs: number;
  /** The coalescing slot, and the request being written (a terminal state settles it without waiting for the write). */
  private waiting: RenewalRequest | undefined;
  private writing: RenewalRequest | undefined;
  private wakeUps: Subject<void> | undefined;
  private resolveLost: (error: LeaseEnd) => void = () => undefined;
  /** Resolves with what ended the lease when it is lost or its job is cancelled; never settles if it closes first. */
  readonly lost = new Promise<LeaseEnd>((resolve) => {
    this.resolveLost = resolve;
  });
  private readonly now: () => number;
  private readonly beats: LeaseBeats;
  private readonly watchdog: Watchdog;
  /** Lines logged and not written yet: the next write takes them (`write`, or `takeLogsForOutcome`). */
  private readonly logs = new LogBuffer();
  /** The last write failed and its retry waits: lines wait for it rather than ask for writes of their own. */
  private backingOff = false;

  constructor(private readonly config: LeaseConfig) {
    const { heartbeatIntervalMs, leaseMs } = config;
    if (!isDuration(heartbeatIntervalMs)) throw new InvalidDurationError('heartbeatIntervalMs', heartbeatIntervalMs);
    if (!isDuration(leaseMs)) throw new InvalidDurationError('leaseMs', leaseMs);
    // Looked up at call time, so a clock faked after construction is still honoured.
    this.now = config.now ?? (() => Date.now());
    const clock = config.heartbeatClock ?? new HeartbeatClock(this.now);
    this.beats = new LeaseBeats(clock, heartbeatIntervalMs, this.now, () => this.beat());
    this.watchdog = new Watchdog(this.now, () => this.goStale('expired'));
    this.deadline = config.lockedUntil.getTime();
    const claimedAt = config.claimedAt?.getTime();
    this.recordedMs = claimedAt === undefined ? leaseMs : Math.min(leaseMs, this.deadline - claimedAt);
  }

  /** Schedules the first beat, and arms the watchdog unless that beat comes before the deadline. No-op if repeated. */
  start(): void {
    if (this.state !== State.Created) return;
    this.state = State.Renewing;
    const claimedAt = this.config.claimedAt?.getTime() ?? this.deadline - this.config.leaseMs;
    const at = this.beats.firstBeatAt(claimedAt, this.deadline, this.config.leaseMs);
    if (at >= this.deadline) this.watchdog.arm(this.deadline); // stale at once when the deadline has passed
    if (this.state === State.Renewing) this.beats.schedule(at);
  }

  /**
   * Asks for `ms` more, from when the covering write starts. Resolves when that write lands; rejects with
   * {@link InvalidDurationError} unless `ms` is finite and > 0 (writing nothing), with the database error object if
   * the write fails (the same for every caller that joined it; the lease stays live until its deadline), with
   * {@link LeaseLostError} once stale or running out. After {@link Lease.close} resolves without writing.
   */
  extend(ms: number): Promise<void> {
    const invalid = lockExtensionError(ms);
    return invalid ? Promise.reject(invalid) : this.ask(ms, undefined);
  }

  /** Writes `progress` (validated) with the next renewal, which asks for at least `leaseMs`; settles as `extend`. */
  updateProgress(progress: JobProgress): Promise<void> {
    return this.ask(this.config.leaseMs, progress);
  }

  /**
   * Appends a line to the next write (a beat, an extension, progress, or the outcome): lines coalesce between writes.
   * Once LOG_FLUSH_LINES wait and no write is waiting, it asks for one (a renewal), so a chatty handler's lines show
   * while it runs; not while a failed write's retry is backing off. Dropped once the lease is running out or over:
   * the row is no longer this execution's to write.
   */
  log(line: JobLogLine): void {
    if (this.state !== State.Created && this.state !== State.Renewing) return;
    this.logs.add(line);
    if (this.backingOff || this.waiting || !this.logs.wantsWrite) return;
    void this.request(this.config.leaseMs, undefined);
  }

  /**
   * For the outcome write: the lines not written yet, taken once the write in flight (which may carry some) settled,
   * so that its lines have landed or wait again. Renewals carry no line from then on: the outcome has them.
   */
  async takeLogsForOutcome(): Promise<LogBatch | undefined> {
    this.logs.keepForOutcome();
    await this.writing?.promise.then(
      () => undefined,
      () => undefined,
    );
    return this.logs.take();
  }

  /**
   * Stops every further renewal but keeps the watchdog: the lease runs out at its deadline and goes stale as usual
   * (for a handler that ignores its abort: its row is then taken over like a crashed worker's, never earlier). A
   * write in flight may still land.
   */
  stopRenewing(): void {
    if (this.state !== State.Created && this.state !== State.Renewing) return;
    this.state = State.RunningOut;
    this.beats.stop();
    if (!this.watchdog.armed) this.watchdog.arm(this.deadline);
    const waiting = this.waiting;
    this.waiting = undefined;
    waiting?.reject(this.lostError('expired'));
  }

  /** The job was cancelled: nothing more is written, every outstanding and later request rejects with `reason`. */
  cancel(reason: JobCancelledError): void {
    this.end(reason);
  }

  /** Terminal: the execution finished. Outstanding requests resolve. Idempotent; after stale it changes nothing. */
  close(): void {
    if (this.isTerminal) return;
    this.state = State.Closed;
    this.finish((request) => request.resolve());
  }

  /** Current deadline (never moves backwards). */
  get expiresAt(): Date {
    return new Date(this.deadline);
  }

  /** The `leaseMs` the row records: a cancel raises its deadline by this much, the time a cancelled handler has. */
  get recordedLeaseMs(): number {
    return this.recordedMs;
  }

  /** The execution no longer owns its row: its lease was lost, or its job cancelled. */
  get isStale(): boolean {
    return this.state === State.Ended;
  }

  /** The job was cancelled: by {@link Lease.cancel}, or as a renewal found it. */
  get isCancelled(): boolean {
    return this.endedBy instanceof JobCancelledError;
  }

  private get isTerminal(): boolean {
    return this.state === State.Closed || this.state === State.Ended;
  }

  /** The first beat arms the watchdog (for the claim's deadline); every beat asks for a full lease. */
  private beat(): void {
    if (this.state === State.Renewing && !this.watchdog.armed) this.watchdog.arm(this.deadline);
    if (this.state !== State.Renewing) return;
    this.beats.schedule(this.now() + this.beats.interval);
    void this.request(this.config.leaseMs, undefined);
  }

  private ask(ms: number, progress: JobProgress | undefined): Promise<void> {
    if (this.state === State.Ended) return Promise.reject(this.endedBy);
    if (this.state === State.Closed) return Promise.resolve();
    if (this.state === State.RunningOut) return Promise.reject(this.lostError('expired'));
    return this.request(ms, progress);
  }

  /** Joins the waiting request, or opens one and wakes the pipeline (ignored during a write, whose repeat takes it). */
  private request(ms: number, progress: JobProgress | undefined): Promise<void> {
    if (this.waiting) return this.waiting.join(ms, progress);
    const request = new RenewalRequest(ms, progress);
    this.waiting = request;
    this.wakeUps ??= this.openPipeline();
    this.wakeUps.next();
    return request.promise;
  }

  private openPipeline(): Subject<void> {
    const wakeUps = new Subject<void>();
    const drain = defer(() => this.write()).pipe(repeat({ delay: () => (this.waiting ? of(true) : EMPTY) }));
    wakeUps.pipe(exhaustMap(() => drain)).subscribe();
    return wakeUps;
  }

  /** Writes the waiting request. Never rejects: every outcome is settled on the request. */
  private async write(): Promise<void> {
    const request = this.waiting;
    if (!request) return;
    const now = this.now();
    // Never sent past the owner's deadline (its watchdog ends the lease there), so the write's fence needs only the
    // lock: one sent before the deadline is applied even when it reaches the server after it.
    if (now >= this.deadline) return this.goStale('expired');
    this.waiting = undefined;
    this.writing = request;
    const logs = this.logs.takeForRenewal();
    let answer: RenewalAnswer;
    try {
      answer = await this.config.renew(new Date(now + request.ms), request.progress, logs);
    } catch (error) {
      if (logs) this.logs.putBack(logs); // not written: the next write carries them
      if (this.isTerminal) return; // it settled the request
      this.backingOff = true;
      this.writing = undefined;
      request.reject(error); // live until the deadline: retried soon, else the watchdog ends the lease
      if (this.state === State.Renewing) this.beats.failed(this.deadline);
      return;
    }
    this.land(request, answer);
  }

  private land(request: RenewalRequest, answer: RenewalAnswer): void {
    if (answer === 'finished') {
      this.close(); // not lost: this execution's own write ended the run
    } else if (this.isTerminal) {
      const late = this.state === State.Ended && answer instanceof Date && answer.getTime() > this.deadline;
      if (late) this.config.relinquish?.(new Date(this.deadline)).catch(() => undefined);
    } else if (answer === 'cancelled') {
      const reason = new JobCancelledError(this.config.jobId);
      this.end(reason);
      const { onCancelled } = this.config;
      if (onCancelled) notify(() => onCancelled(reason));
    } else if (answer === null) {
      // The lock no longer holds the row (reclaimed); expired when that happened past the deadline.
      this.goStale(this.now() >= this.deadline ? 'expired' : 'taken-over');
    } else {
      this.recordedMs = this.config.leaseMs;
      this.beats.landed();
      this.backingOff = false;
      this.deadline = Math.max(this.deadline, answer.getTime());
      this.watchdog.arm(this.deadline); // landed past the deadline: stale at once, which rejects the request
      if (this.isTerminal) return;
      this.writing = undefined;
      request.resolve();
      const { onRenewed, onProgress } = this.config;
      const { progress } = request;
      if (onRenewed) notify(() => onRenewed(new Date(this.deadline)));
      if (onProgress && progress !== undefined) notify(() => onProgress(progress));
    }
  }

  private lostError(reason: LeaseLostError['reason']): LeaseLostError {
    return new LeaseLostError(this.config.jobId, this.config.lockId, reason);
  }

  /** Stale exactly once: the lease ends (every outstanding request rejects), then the runner is told. */
  private goStale(reason: LeaseLostError['reason']): void {
    if (this.isTerminal) return;
    const error = this.lostError(reason);
    this.end(error);
    notify(() => this.config.onStale(error));
  }

  private end(error: LeaseEnd): void {
    if (this.isTerminal) return;
    this.state = State.Ended;
    this.endedBy = error;
    this.finish((request) => request.reject(error));
    this.resolveLost(error);
  }

  /** No beat, timer or wake-up outlives the lease; the requests written and waiting are settled now. */
  private finish(settle: (request: RenewalRequest) => void): void {
    this.beats.stop();
    this.watchdog.disarm();
    this.wakeUps?.complete(); // a write in flight still ends; its repeat then finds nothing waiting
    const { writing, waiting } = this;
    this.writing = this.waiting = undefined;
    if (writing) settle(writing);
    if (waiting) settle(waiting);
  }
}

/** A throwing listener must not corrupt the lease or its pipeline: it surfaces as an unhandled rejection. */
function notify(listener: () => void): void {
  try {
    listener();
  } catch (error) {
    void Promise.reject(error);
  }
}
