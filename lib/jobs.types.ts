import type { JobRecord } from './persistence/job.types';

/** Options of `JobsService.enqueue`. */
export interface EnqueueOptions {
  /** Earliest run time. Mutually exclusive with `delayMs`. @default now */
  runAt?: Date;
  /** Run after this many ms. Mutually exclusive with `runAt`. */
  delayMs?: number;
  /** Higher runs first among due jobs. @default 0 */
  priority?: number;
  /** Attempts before dead-lettering. @default the handler's, else the module's `maxAttempts` */
  maxAttempts?: number;
  /**
   * At most one pending or running job per key: enqueueing again returns the existing job. The key is freed
   * when the job completes, dies, fails or is cancelled.
   */
  dedupeKey?: string;
  /** Reject names no handler in this process knows (only when this process has handlers). @default true */
  strict?: boolean;
}

/** One item of `JobsService.enqueueMany`. */
export interface EnqueueItem<TPayload = unknown> {
  name: string;
  payload?: TPayload;
  options?: EnqueueOptions;
}

/** Result of `JobsService.runNow`. */
export type RunNowOutcome =
  | { kind: 'not_found' }
  | { kind: 'conflict'; reason: 'locked' | 'not_due' | 'terminal'; job: JobRecord }
  | { kind: 'executed'; job: JobRecord }
  /** Claimed, but the handler was never called (the claim's lease ended before it could start, or the row cannot run as stored). */
  | { kind: 'not_started'; reason: string; job: JobRecord };
