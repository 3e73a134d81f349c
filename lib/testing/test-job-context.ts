import { Types } from 'mongoose';
import { lockExtensionError } from '../lease/lock-extension.js';
import { InvalidOptionError } from '../model/errors/invalid-option.error.js';
import { JobCancelledError } from '../model/errors/job-cancelled.error.js';
import { LeaseLostError } from '../model/errors/lease-lost.error.js';
import type { JobExecutionContext } from '../model/job-execution-context.js';
import { parseJobId } from '../model/job-id.js';
import { type JobLogLine, logLine } from '../model/job-log.js';
import type { JobProgress } from '../model/job-record.js';
import { DEFAULT_JOBS_OPTIONS, MAX_JOB_NAME_LENGTH } from '../model/jobs.constants.js';
import { progressSnapshot } from '../model/progress-validator.js';
import { duration, nonEmptyString, positiveInteger } from '../model/validate.js';

/** What `createTestJobContext` may be told; everything else has a default of a first attempt. */
export interface TestJobContextOverrides {
  /** 24-character hex. @default a new ObjectId's */
  jobId?: string;
  /** @default 'test-job' */
  name?: string;
  /** 1-based. @default 1 */
  attempt?: number;
  /** @default 'test-worker#1' */
  lockId?: string;
  /** @default 1 (a job's first claim) */
  fencingToken?: number;
  /** The lease the execution starts with, in ms from now. @default 30000 (the module's default `leaseMs`) */
  leaseMs?: number;
}

/**
 * A {@link JobExecutionContext} for a handler's unit test, with what a test needs to drive and observe it. Nothing is
 * written anywhere; calls the real context would refuse are refused the same way, by the same rules.
 */
export interface TestJobContext extends JobExecutionContext {
  /** The `ms` of every accepted `extendLockTime` call, in call order (refused calls are not recorded). */
  readonly extendLockTimeCalls: readonly number[];
  /**
   * Every accepted `updateProgress` value, in call order, as it was when passed (objects are copied, as the real
   * context copies what it writes); refused calls are not recorded.
   */
  readonly progressUpdates: readonly JobProgress[];
  /**
   * Every accepted `log` line, in call order, as a worker would store it (time, attempt, message cut at 500 bytes of
   * UTF-8); all of them, where a job keeps its last 200. Lines logged once the context is stale are dropped, as a
   * worker drops them.
   */
  readonly logs: readonly JobLogLine[];
  /**
   * Aborts `signal` with `reason` (the first reason wins, as in a worker), e.g. a `JobTimeoutError` or
   * `WorkerShutdownError`. A `JobCancelledError` (the default, as `jobs.cancel(id)` would) or a `LeaseLostError` also
   * makes the context stale: `isStale` turns true and later `extendLockTime`/`updateProgress` calls reject with it,
   * as they do once a real execution has seen its job cancelled or its lease lost.
   * @default reason a `JobCancelledError` for this job
   */
  abort(reason?: Error): void;
}

/**
 * Builds a context to call a handler with in a unit test, without MongoDB or Nest:
 *
 * @example
 * const ctx = createTestJobContext({ attempt: 2 });
 * await handlers.build({ reportId: 'r1' }, ctx);
 * expect(ctx.progressUpdates.at(-1)).toEqual({ done: 3, total: 3 });
 *
 * ctx.abort(); // as `jobs.cancel(id)` would while the handler runs
 * await expect(handlers.build({ reportId: 'r1' }, ctx)).rejects.toBeInstanceOf(JobCancelledError);
 * @throws InvalidOptionError for an override outside its rule (a jobId that is not 24-hex, an attempt or a fencing
 * token that is not a positive integer, an empty name or lock id, a `leaseMs` that is not a duration).
 */
export function createTestJobContext(overrides: TestJobContextOverrides = {}): TestJobContext {
  const jobId = overrides.jobId ?? new Types.ObjectId().toHexString();
  if (!parseJobId(jobId)) throw new InvalidOptionError('jobId', jobId, 'must be a 24-character hex string');
  const name = nonEmptyString('name', overrides.name ?? 'test-job', MAX_JOB_NAME_LENGTH);
  const attempt = positiveInteger('attempt', overrides.attempt ?? 1);
  const lockId = nonEmptyString('lockId', overrides.lockId ?? 'test-worker#1');
  const fencingToken = positiveInteger('fencingToken', overrides.fencingToken ?? 1);
  const leaseMs = duration('leaseMs', overrides.leaseMs ?? DEFAULT_JOBS_OPTIONS.leaseMs);

  const controller = new AbortController();
  let leaseExpiresAt = Date.now() + leaseMs;
  /** Why the execution no longer owns its row (a cancel or a lost lease): later lease calls reject with it. */
  let stale: LeaseLostError | JobCancelledError | undefined;
  const extendLockTimeCalls: number[] = [];
  const progressUpdates: JobProgress[] = [];
  const logs: JobLogLine[] = [];

  return {
    jobId,
    name,
    attempt,
    lockId,
    fencingToken,
    signal: controller.signal,
    get leaseExpiresAt() {
      return new Date(leaseExpiresAt);
    },
    get isStale() {
      return stale !== undefined;
    },
    extendLockTimeCalls,
    progressUpdates,
    logs,
    log(message: string): void {
      const line = logLine(message, attempt, new Date());
      if (!stale) logs.push(line);
    },
    extendLockTime(ms: number): Promise<void> {
      return forgettable(() => {
        const invalid = lockExtensionError(ms);
        if (invalid) throw invalid;
        if (stale) throw stale;
        extendLockTimeCalls.push(ms);
        leaseExpiresAt = Math.max(leaseExpiresAt, Date.now() + ms); // a renewal never lowers the deadline
      });
    },
    updateProgress(value: JobProgress): Promise<void> {
      return forgettable(() => {
        const snapshot = progressSnapshot(value);
        if (stale) throw stale;
        progressUpdates.push(snapshot);
      });
    },
    abort(reason: Error = new JobCancelledError(jobId)): void {
      // A cancel or a lost lease ends the lease even after another abort (a timeout), as in a worker.
      if (reason instanceof LeaseLostError || reason instanceof JobCancelledError) stale ??= reason;
      if (!controller.signal.aborted) controller.abort(reason);
    },
  };
}

/**
 * Runs `call` as a settled promise that a caller may also ignore: the real context marks its renewal and progress
 * promises handled (a handler that fires and forgets one must not crash the worker), so a refused call not awaited
 * must not fail the user's test with an unhandled rejection either. A caller who awaits still gets the rejection.
 */
function forgettable(call: () => void): Promise<void> {
  let result: Promise<void>;
  try {
    call();
    result = Promise.resolve();
  } catch (error) {
    result = Promise.reject(error);
  }
  result.catch(() => undefined);
  return result;
}
