/** Poll-loop facts for health checks and the fleet view. */
export interface PollState {
  /** False before bootstrap, after shutdown began, or with `worker: false`. */
  polling: boolean;
  /** Executions running in this process now. */
  running: number;
  lastPollAt: Date | null;
  /** When the loop last showed progress: its last finished poll, or its start while the first poll runs. */
  progressAt: Date | null;
  lastError: string | null;
  /** Polls in a row whose claim threw: the loop polls on time but takes nothing. */
  consecutiveClaimFailures: number;
  /** The longest the loop waits between polls now: `pollIntervalMs`, or its latest longer sleep (the stream's safety net). */
  intervalMs: number;
}

/**
 * What the rest of the module may know of this process's worker (fleet presence, liveness), without reaching into
 * the poll loop: its state, and the end of its shutdown. Injected under `WORKER_STATE`.
 */
export interface WorkerState {
  pollState(): PollState;
  /**
   * Resolves once the worker stopped (its running jobs settled or left to their leases, by the module's shutdown
   * deadline). Starts the shutdown when none began, as the worker's own shutdown hook would: Nest may call a
   * dependent's hook before the worker's, and that hook must not wait for a shutdown nobody started.
   */
  stopped(): Promise<void>;
}

/** Injection token of this process's `WorkerState` (the poll loop). */
export const WORKER_STATE = Symbol('nestjs-mongo-jobs:worker-state');
