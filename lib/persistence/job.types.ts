/** Lifecycle of a job. */
export type JobStatus = 'pending' | 'running' | 'completed' | 'dead' | 'failed' | 'cancelled';

export const JOB_STATUSES: readonly JobStatus[] = ['pending', 'running', 'completed', 'dead', 'failed', 'cancelled'];

/** One finished-without-success attempt. */
export interface JobAttempt {
  at: Date;
  error: string;
  /** Class name of the error (`LeaseExpired` for an attempt lost with its worker). */
  errorClass: string;
}

/** A job as stored, with `id` as a hex string. */
export interface JobRecord<TPayload = unknown> {
  id: string;
  name: string;
  payload: TPayload;
  status: JobStatus;
  runAt: Date;
  /** Higher runs first. */
  priority: number;
  /** Attempts that ended without success (a lost lease counts). */
  attemptCount: number;
  maxAttempts: number;
  /** Most recent failed attempts, oldest first. */
  attempts: JobAttempt[];
  lastError: string | null;
  /** Lock id of the execution that owns the job while `running`. */
  lockedBy: string | null;
  /** Lease deadline while `running`; on a job cancelled while running, that run's last deadline (see `retry`). */
  lockedUntil: Date | null;
  /** Increases on every claim of this job. */
  fencingToken: number;
  /** The key given at enqueue; kept after the job finishes (it only dedupes while the job is pending or running). */
  dedupeKey: string | null;
  createdAt: Date;
  updatedAt: Date;
  startedAt: Date | null;
  finishedAt: Date | null;
}
