import type { ClaimedJob } from '../claim/job-claim.service';
import type { RegisteredJobHandler } from '../discovery/job-handler.registry';
import { JobCancelledError } from '../errors/job-cancelled.error';
import { JobTimeoutError } from '../errors/job-timeout.error';
import { LeaseLostError } from '../errors/lease-lost.error';
import { WorkerShutdownError } from '../errors/worker-shutdown.error';
import type { Lease } from '../lease/lease';
import { decodePayload } from '../utils/payload-codec';
import type { JobExecutionContext } from './job-execution-context';

/** How an execution ended; decides what (if anything) the runner writes. */
export type ExecutionOutcome =
  | { kind: 'succeeded' }
  | { kind: 'failed'; error: unknown }
  | { kind: 'stale'; error: LeaseLostError }
  | { kind: 'cancelled' }
  | { kind: 'shutdown' };

/** One attempt of one job in this process: the handler call, its signal, its lease and its timeout. */
export class JobExecution {
  readonly jobId: string;
  readonly context: JobExecutionContext;
  private readonly controller = new AbortController();
  private lease?: Lease;

  constructor(
    readonly claim: ClaimedJob,
    readonly handler: RegisteredJobHandler,
  ) {
    const { doc, lockId } = claim;
    this.jobId = doc._id.toHexString();
    const execution = this;
    this.context = {
      jobId: this.jobId,
      name: doc.name,
      attempt: doc.attemptCount + 1,
      lockId,
      fencingToken: doc.fencingToken,
      signal: this.controller.signal,
      get leaseExpiresAt() {
        return execution.lease?.expiresAt ?? doc.lockedUntil ?? new Date(0);
      },
      get isStale() {
        return execution.lease?.isStale ?? false;
      },
      extendLockTime: (ms: number) => {
        const renewal = this.requireLease().extend(ms);
        // Callers who await still get the rejection; one who fires and forgets must not crash the process.
        renewal.catch(() => undefined);
        return renewal;
      },
    };
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Stops the handler with a reason (first reason wins). */
  abort(reason: Error): void {
    if (!this.controller.signal.aborted) this.controller.abort(reason);
  }

  /**
   * Runs the handler under `lease` until it settles or the signal aborts — whichever is first: a handler that
   * ignores its signal does not hold the slot, and its late result is ignored.
   */
  async run(lease: Lease, onStarted: () => void = () => undefined): Promise<ExecutionOutcome> {
    this.lease = lease;
    const { signal } = this.controller;
    lease.start();
    if (signal.aborted) {
      // The claim's answer came back after its own deadline (slow database): the row may already belong to
      // someone else, so the handler must not run at all. The row is reclaimed with a LeaseExpired attempt.
      lease.close();
      return abortOutcome(signal.reason);
    }
    // The claim used the module's lease; a handler with a longer one asks for it straight away.
    const { startedAt, lockedUntil } = this.claim.doc;
    const claimedLeaseMs = (lockedUntil?.getTime() ?? 0) - (startedAt?.getTime() ?? 0);
    if (this.handler.leaseMs > claimedLeaseMs) lease.extend(this.handler.leaseMs).catch(() => undefined);
    let onAbort: () => void = () => undefined;
    const aborted = new Promise<void>((resolve) => {
      onAbort = resolve;
      signal.addEventListener('abort', onAbort, { once: true });
    });
    const { timeoutMs } = this.handler;
    const timer =
      timeoutMs === undefined
        ? undefined
        : setTimeout(() => this.abort(new JobTimeoutError(this.jobId, timeoutMs)), timeoutMs);
    timer?.unref?.();
    onStarted();
    let outcome: ExecutionOutcome;
    try {
      const invocation = Promise.resolve().then(() =>
        this.handler.handler(decodePayload(this.claim.doc.payload), this.context),
      );
      // A handler that rejects after we stopped waiting must not become an unhandled rejection.
      invocation.catch(() => undefined);
      await Promise.race([invocation, aborted]);
      outcome = signal.aborted ? abortOutcome(signal.reason) : { kind: 'succeeded' };
    } catch (error) {
      outcome = signal.aborted ? abortOutcome(signal.reason) : { kind: 'failed', error };
    } finally {
      clearTimeout(timer);
      lease.close();
      signal.removeEventListener('abort', onAbort);
    }
    return outcome;
  }

  private requireLease(): Lease {
    if (!this.lease) throw new Error('The execution has not started yet');
    return this.lease;
  }
}

function abortOutcome(reason: unknown): ExecutionOutcome {
  if (reason instanceof LeaseLostError) return { kind: 'stale', error: reason };
  if (reason instanceof JobCancelledError) return { kind: 'cancelled' };
  if (reason instanceof WorkerShutdownError) return { kind: 'shutdown' };
  return { kind: 'failed', error: reason };
}
