/** Liveness facts of this process's worker and its database; what health checks report. Never payloads. */
export interface JobsWorkerStatus {
  /** `up` when the database answered and (for a worker) the poll loop is polling on schedule. */
  status: 'up' | 'down';
  /** Whether this process runs a poll loop (`worker` option). */
  worker: boolean;
  workerId: string;
  /** Jobs running in this process now. */
  running: number;
  concurrency: number;
  /** End of the poll loop's last iteration (null before the first). */
  lastPollAt: Date | null;
  /** Message of the last claim/finalize error, if any. */
  lastError: string | null;
  database: 'up' | 'down';
  /**
   * Names paused fleet-wide as this process last read them (a worker reads them every poll interval), sorted: its poll
   * loop claims none of them. A pause does not make the status `down`.
   */
  paused: string[];
  /** Why the status is `down`, if it is. */
  reason?: string;
}
