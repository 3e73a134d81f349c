import type { JobProgress } from './job-record.js';

/**
 * What a handler gets besides its payload. One per execution (attempt) of a job.
 *
 * @example
 * ```ts
 * @JobHandler('report.build')
 * async build(payload: { reportId: string }, ctx: JobExecutionContext) {
 *   for (const chunk of chunks) {
 *     ctx.signal.throwIfAborted();         // lease lost, cancelled, timed out or shutting down: stop by throwing
 *     await writeChunk(chunk, ctx.fencingToken);
 *     await ctx.extendLockTime(60_000);    // optional: heartbeats already renew every lease/3
 *   }
 * }
 * ```
 */
export interface JobExecutionContext {
  /** Id of the job (24-character hex). */
  readonly jobId: string;
  /** Job name, as given to `@JobHandler`. */
  readonly name: string;
  /** This attempt's number, 1-based (a lost lease counts as an attempt). */
  readonly attempt: number;
  /** Lock id this execution holds the job under (`lockedBy`). */
  readonly lockId: string;
  /** Increases on every claim of this job: pass it downstream so systems can reject a stale owner's writes. */
  readonly fencingToken: number;
  /**
   * Aborted when this execution must stop: its lease was lost (`LeaseLostError`), the job was cancelled
   * (`JobCancelledError`), it timed out (`JobTimeoutError`) or the worker is shutting down (`WorkerShutdownError`).
   * `signal.reason` holds that error. The attempt ends when the handler settles, and its outcome is what the
   * handler did: stop by rejecting with `signal.reason` (e.g. `signal.throwIfAborted()`) for that reason's rule
   * (a shutdown releases the job without counting an attempt); returning normally marks the job completed. A
   * cancelled job's attempt ends as cancelled whatever the handler does.
   */
  readonly signal: AbortSignal;
  /** Current lease deadline. */
  readonly leaseExpiresAt: Date;
  /** True once the lease is lost or the job was cancelled; nothing this execution writes afterwards is kept. */
  readonly isStale: boolean;
  /**
   * Extends the lease to at least `ms` from when the renewal write starts. Concurrent calls coalesce into at most
   * one follow-up write (the longest duration wins). Rejects with `InvalidDurationError` for non-finite or ≤ 0 `ms`,
   * with `JobCancelledError` once the job was cancelled, with `LeaseLostError` when the job is otherwise no longer
   * ours, and with the database's own error when the write failed.
   */
  extendLockTime(ms: number): Promise<void>;
  /**
   * Reports progress: a number from 0 to 100, or a small plain object (at most 4 KB as BSON, payload rules), e.g.
   * `{ done: 40, total: 120 }`. Stored on the row as `progress` (see `findById`) and emitted as a `progress` event
   * once written. Writes ride the lease's renewal pipeline: at most one in flight, calls made meanwhile coalesce into
   * one follow-up (the latest value wins), every write is owner-fenced and also renews the lease. Call it as often as
   * you like, awaited or not; the value set last before the handler returns is on the completed row. Resolves when
   * the write covering the call lands (at once, writing nothing, after the job finished); rejects with
   * `InvalidProgressError` for anything else (NaN, > 100, arrays, functions, …), `JobCancelledError` once the job was
   * cancelled, `LeaseLostError` when it is otherwise no longer ours, or the database's error.
   */
  updateProgress(value: JobProgress): Promise<void>;
  /**
   * Appends a line to the job's log (`JobRecord.logs`, the dashboard's job panel), with the time and this attempt.
   * Never a write per line: lines wait for the lease's next write (a heartbeat, an `extendLockTime`, progress, or a
   * write of their own once 50 wait) and the rest go with the outcome write. The job keeps the last 200 lines across
   * all its attempts, each cut at 500 bytes of UTF-8. Returns at once; lines logged after the lease was lost or the
   * job cancelled are not stored (see docs/handlers.md, "ctx.log", for every case).
   * @throws InvalidOptionError when `message` is not a string
   */
  log(message: string): void;
}
