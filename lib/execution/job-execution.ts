import type { RegisteredJobHandler } from '../handlers/registered-job-handler.js';
import type { Lease } from '../lease/lease.js';
import type { ClaimedJob } from '../model/claimed-job.js';
import { now } from '../model/clock.js';
import { JobCancelledError } from '../model/errors/job-cancelled.error.js';
import { JobTimeoutError } from '../model/errors/job-timeout.error.js';
import { LeaseLostError } from '../model/errors/lease-lost.error.js';
import { WorkerShutdownError } from '../model/errors/worker-shutdown.error.js';
import type { ExecutionOutcome } from '../model/execution-outcome.js';
import type { JobExecutionContext } from '../model/job-execution-context.js';
import { logLine } from '../model/job-log.js';
import type { JobProgress } from '../model/job-record.js';
import { decodePayload } from '../model/payload-codec.js';
import { progressSnapshot } from '../model/progress-validator.js';
import { raceTimeout } from '../model/race-timeout.js';

/** What the runner learns while an execution is under way. */
export interface ExecutionHooks {
  onStarted?: () => void;
  /** The handler has not settled `settleMs` after its abort: it is ignoring its signal. */
  onIgnoredAbort?: (reason: Error) => void;
}

const SETTLED = Symbol('settled');
type Settlement = { ok: true; value: unknown } | { ok: false; error: unknown };

/**
 * One attempt of one job in this process: the handler call, its signal, its lease and its timeout.
 * The attempt ends when the handler settles, not when a timer fires: an abort (timeout, cancellation, lease loss,
 * shutdown) only asks the handler to stop. A handler still running `settleMs` after its abort is reported as
 * ignoring its signal; its lease is then no longer renewed, and the attempt ends when that lease runs out.
 */
export class JobExecution {
  readonly jobId: string;
  readonly context: JobExecutionContext;
  /** Built when the handler first reads `ctx.signal`: a handler that never looks at it costs no AbortController. */
  private controller: AbortController | undefined;
  /** Why the execution was asked to stop (first reason wins). */
  private abortReason: Error | undefined;
  /** Wakes the settle wait on abort (set only while it waits). */
  private wakeOnAbort: (() => void) | undefined;
  /** Told the first abort reason (telemetry records it); set only when someone listens. */
  onAbort: ((reason: Error) => void) | undefined;
  /** The last valid value the handler passed to `ctx.updateProgress`: the completion write stores it. */
  lastProgress: JobProgress | undefined;

  constructor(
    readonly claim: ClaimedJob,
    readonly handler: RegisteredJobHandler,
    jobId: string,
    /** Opened by the runner for this claim; started when the attempt runs. */
    readonly lease: Lease,
  ) {
    const { doc, lockId } = claim;
    this.jobId = jobId;
    const execution = this;
    this.context = {
      jobId,
      name: doc.name,
      attempt: doc.attemptCount + 1,
      lockId,
      fencingToken: doc.fencingToken,
      get signal() {
        return execution.signal;
      },
      get leaseExpiresAt() {
        return lease.expiresAt;
      },
      get isStale() {
        return lease.isStale;
      },
      extendLockTime: (ms: number) => {
        const renewal = lease.extend(ms);
        // Callers who await still get the rejection; one who fires and forgets must not crash the process.
        renewal.catch(() => undefined);
        return renewal;
      },
      log: (message: string) => lease.log(logLine(message, doc.attemptCount + 1, now())),
      updateProgress: (value: JobProgress) => {
        let write: Promise<void>;
        try {
          const snapshot = progressSnapshot(value);
          execution.lastProgress = snapshot;
          write = lease.updateProgress(snapshot);
        } catch (error) {
          write = Promise.reject(error);
        }
        // As extendLockTime: a caller who fires and forgets (an invalid value included) must not crash the process.
        write.catch(() => undefined);
        return write;
      },
    };
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.abortReason) this.controller.abort(this.abortReason);
    }
    return this.controller.signal;
  }

  /**
   * The job was cancelled: its lease ends (the row is no longer ours; `extendLockTime` and `updateProgress` reject
   * with `reason` from now on) and its signal aborts with it, unless it was aborted already. The attempt then ends as
   * cancelled whatever the handler does.
   */
  cancel(reason: JobCancelledError): void {
    this.lease.cancel(reason);
    this.abort(reason);
  }

  /** Stops the handler with a reason (first reason wins). */
  abort(reason: Error): void {
    if (this.abortReason) return;
    this.abortReason = reason;
    this.onAbort?.(reason);
    this.controller?.abort(reason);
    this.wakeOnAbort?.();
  }

  /**
   * How long an aborted handler is given to settle: one lease (its handler's `leaseMs`), but never more than the lease
   * its row records (the module's until the first renewal lands), since a cancel raises the row's deadline by that.
   */
  get settleMs(): number {
    return Math.min(this.handler.leaseMs, this.lease.recordedLeaseMs);
  }

  /**
   * Runs the handler under its lease and resolves its outcome once the handler has settled (or was abandoned).
   * The lease is left open: the runner keeps it renewed until the outcome is written, then closes it. An aborted
   * handler is given `settleMs` (read at the abort) to settle.
   */
  async run(hooks: ExecutionHooks = {}): Promise<ExecutionOutcome> {
    const { lease } = this;
    lease.start();
    if (lease.isCancelled) return { kind: 'cancelled' };
    if (this.abortReason) {
      // The claim's answer came back after its own deadline (slow database): the row may already belong to
      // someone else, so the handler must not run at all. The finalizer hands the row back if it is still this lock's.
      return { kind: 'not_started', reason: this.abortReason.message };
    }
    const { timeoutMs } = this.handler;
    const timer =
      timeoutMs === undefined
        ? undefined
        : setTimeout(() => this.abort(new JobTimeoutError(this.jobId, timeoutMs)), timeoutMs);
    timer?.unref?.();
    hooks.onStarted?.();
    const settlement: Promise<Settlement> = Promise.resolve()
      .then(() => this.handler.handler(decodePayload(this.claim.doc.payload), this.context))
      .then(
        (value: unknown) => ({ ok: true, value }) as const,
        (error: unknown) => ({ ok: false, error }) as const,
      );
    try {
      const settled = await this.settleOrAbandon(settlement, hooks);
      if (settled === 'abandoned') return { kind: 'abandoned', reason: this.requireAbortReason() };
      return this.outcomeOf(settled);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Waits for the handler; after an abort, only `settleMs` more, then until the (no longer renewed) lease ends. */
  private async settleOrAbandon(
    settlement: Promise<Settlement>,
    hooks: ExecutionHooks,
  ): Promise<Settlement | 'abandoned'> {
    const aborted = this.abortReason
      ? Promise.resolve(SETTLED)
      : new Promise<typeof SETTLED>((resolve) => {
          this.wakeOnAbort = () => resolve(SETTLED);
        });
    const first = await Promise.race([settlement, aborted]);
    this.wakeOnAbort = undefined;
    if (first !== SETTLED) return first;
    const second = await raceTimeout(settlement, this.settleMs, (): typeof SETTLED => SETTLED);
    if (second !== SETTLED) return second;
    hooks.onIgnoredAbort?.(this.requireAbortReason());
    this.lease.stopRenewing();
    const third = await Promise.race([settlement, this.lease.lost.then((): typeof SETTLED => SETTLED)]);
    return third === SETTLED ? 'abandoned' : third;
  }

  /** Only after an abort (the settle wait saw one). */
  private requireAbortReason(): Error {
    if (!this.abortReason) throw new Error(`Job ${this.jobId}: no abort reason after an abort`);
    return this.abortReason;
  }

  /**
   * The outcome is what the handler did: resolved, rejected with its abort reason, or failed on its own; a cancelled
   * job's attempt is cancelled whatever it did (its result is discarded, nothing is retried).
   */
  private outcomeOf(settled: Settlement): ExecutionOutcome {
    if (this.lease.isCancelled) return { kind: 'cancelled' };
    const reason = this.abortReason;
    if (this.lease.isStale && reason instanceof LeaseLostError) return { kind: 'stale', error: reason };
    if (settled.ok) return { kind: 'succeeded', result: settled.value };
    if (reason && isAbortRejection(settled.error, reason)) return abortOutcome(reason);
    return { kind: 'failed', error: settled.error };
  }
}

/**
 * A handler "rejected with the abort" when it rethrew the signal's reason, or an AbortError for it. Told by its name,
 * not `instanceof Error`: Node's own AbortErrors (`timers/promises`, `fetch`) come from the main realm, and a handler
 * loaded in a VM context (Jest's test environment) has another `Error`.
 */
function isAbortRejection(error: unknown, reason: unknown): boolean {
  if (error === reason) return true;
  if (typeof error !== 'object' || error === null) return false;
  try {
    return (error as { name?: unknown }).name === 'AbortError';
  } catch {
    return false; // a getter or a Proxy that throws
  }
}

function abortOutcome(reason: unknown): ExecutionOutcome {
  if (reason instanceof LeaseLostError) return { kind: 'stale', error: reason };
  if (reason instanceof JobCancelledError) return { kind: 'cancelled' };
  if (reason instanceof WorkerShutdownError) return { kind: 'shutdown' };
  return { kind: 'failed', error: reason };
}
