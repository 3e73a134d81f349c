import type { JobLogLine } from './job-log.js';
/** Lifecycle of a job. */
export type JobStatus = 'pending' | 'running' | 'completed' | 'dead' | 'failed' | 'cancelled';

export const JOB_STATUSES: readonly JobStatus[] = ['pending', 'running', 'completed', 'dead', 'failed', 'cancelled'];

/** The statuses a job ends in: only rows in one of them are ever deleted (retention, `purge`). */
export type FinishedStatus = Exclude<JobStatus, 'pending' | 'running'>;

export const FINISHED_STATUSES: readonly FinishedStatus[] = ['completed', 'dead', 'failed', 'cancelled'];

/** One finished-without-success attempt. Error text is bounded (a few KB); longer text ends with `… [truncated, …]`. */
export interface JobAttempt {
  at: Date;
  /** The error's message (at most 2 KB). */
  error: string;
  /** Class name of the error (`LeaseExpired` for an attempt lost with its worker, `NonError` for a thrown non-Error). */
  errorClass: string;
  /** The error's stack and its `cause` chain (at most 4 KB, start and end kept); absent for non-Errors and lost leases. */
  stack?: string;
}

/**
 * What `ctx.updateProgress` stores: a percentage from 0 to 100, or a small plain object (at most 4 KB as BSON, same
 * rules as payloads), e.g. `{ done: 40, total: 120, stage: 'upload' }`.
 */
export type JobProgress = number | Record<string, unknown>;

/** A job as stored, with `id` as a hex string. */
export interface JobRecord<TPayload = unknown> {
  id: string;
  name: string;
  payload: TPayload;
  status: JobStatus;
  runAt: Date;
  /** Higher runs first. */
  priority: number;
  /**
   * Attempts that ended without success: each handler run that failed (threw, timed out, `UnrecoverableJobError`)
   * and each reclaim of a run whose lease ran out (`LeaseExpired`, its worker died). A success, a release at shutdown
   * and a cancel add nothing, so a job completed on its first try has 0 while its handler saw `ctx.attempt` 1
   * (`ctx.attempt` is `attemptCount + 1` when the run starts). The job is dead once it reaches `maxAttempts`;
   * `retry()` resets it to 0 (`attempts[]` keeps the history).
   */
  attemptCount: number;
  maxAttempts: number;
  /** Most recent failed attempts, oldest first. */
  attempts: JobAttempt[];
  /** Message of the most recent failure (bounded like `attempts[].error`). */
  lastError: string | null;
  /** Lock id of the execution that owns the job while `running`. */
  lockedBy: string | null;
  /**
   * Lease deadline while `running`; on a job cancelled while running, that run's last deadline plus one lease (its
   * handler's settle window: until then it may still run, see `retry`).
   */
  lockedUntil: Date | null;
  /** Increases on every claim of this job. */
  fencingToken: number;
  /** The key given at enqueue; kept after the job finishes (it only dedupes while the job is pending or running). */
  dedupeKey: string | null;
  /** The `group` it was enqueued with (what `groupConcurrency` counts by), or null. */
  group: string | null;
  /** When a finished job becomes due for deletion (its retention); null while it runs, or when it is kept. */
  expiresAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
  startedAt: Date | null;
  finishedAt: Date | null;
  /**
   * The value the handler resolved with, stored when the job completed (read back as stored, like the payload);
   * `null` when it returned nothing (or `undefined`) and while the job is not completed.
   */
  result: unknown;
  /**
   * The last value the handler passed to `ctx.updateProgress` that was written: updated while it runs (coalesced, at
   * most one write in flight), and on a completed job the value its last attempt set last before the handler returned
   * (`null` when that attempt set none). A retry shows the previous attempt's value until it sets its own.
   */
  progress: JobProgress | null;
  /**
   * What handlers logged with `ctx.log`, oldest first, across every attempt (each line says which): the last 200 lines
   * written, each at most 500 bytes. Written with the lease's renewals and with the outcome, so a running job shows its
   * lines a heartbeat late at most.
   */
  logs: JobLogLine[];
  /** Whether older lines were dropped to keep the last 200. */
  logsTruncated: boolean;
}
