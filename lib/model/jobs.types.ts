import type { ClientSession } from 'mongoose';
import type { JobRecord } from './job-record.js';

/** Options of `JobsService.enqueue`. */
export interface EnqueueOptions {
  /** Earliest run time, in the years 2000 to 9999 (UTC). Mutually exclusive with `delayMs`. @default now */
  runAt?: Date;
  /** Run after this many ms. Mutually exclusive with `runAt`. */
  delayMs?: number;
  /** Higher runs first among due jobs. @default 0 */
  priority?: number;
  /** Attempts before dead-lettering, an integer from 1 to 1,000. @default the handler's, else the module's `maxAttempts` */
  maxAttempts?: number;
  /**
   * At most one pending or running job per key: enqueueing again returns the existing job. The key is freed
   * when the job completes, dies, fails or is cancelled.
   */
  dedupeKey?: string;
  /**
   * The job's group, e.g. a tenant id (at most 256 characters): a handler with `groupConcurrency` runs at most that
   * many jobs of one group at once across the fleet, groups in parallel. Ignored by handlers without it.
   */
  group?: string;
  /** Reject names no handler in this process knows (only when this process has handlers). @default true */
  strict?: boolean;
  /**
   * A MongoDB session of the jobs connection (mongoose's `ClientSession` is the driver's): every read and write of the
   * enqueue goes in it, so inside a transaction the job exists if and only if the transaction commits (outbox). The
   * `enqueued` event and this process's wake-up wait for the commit; a rolled-back job announces nothing. See the
   * README's "Enqueue inside a transaction".
   */
  session?: ClientSession;
}

/** The options of one `enqueueMany` item: a session is the whole batch's (`EnqueueManyOptions`). */
export type EnqueueItemOptions = Omit<EnqueueOptions, 'session'>;

/** Options of `JobsService.enqueueMany` that apply to the whole batch. */
export interface EnqueueManyOptions {
  /** As `EnqueueOptions.session`, for every item (an item's own options cannot carry one). */
  session?: ClientSession;
}

/** What `enqueue`/`enqueueMany` return: the job, and whether it was stored by this call. */
export type EnqueuedJobRecord<TPayload = unknown> = JobRecord<TPayload> & {
  /**
   * True when nothing was stored because a pending or running job of the same name holds the `dedupeKey`: the record
   * is that job's (its payload and options, not yours), and no `enqueued` event was emitted for it.
   */
  deduplicated: boolean;
};

/** One item of `JobsService.enqueueMany`. */
export interface EnqueueItem<TPayload = unknown> {
  name: string;
  payload?: TPayload;
  options?: EnqueueItemOptions;
}

/**
 * Why `JobsService.runNow` ran nothing: `locked` — running under a live lease; `not_due` — pending with a future
 * `runAt`; `terminal` — already completed, dead, failed or cancelled; `no_handler` — no `@JobHandler` for its name
 * in this process (it is left for a process that has one); `limit_reached` — its name (or group) is at a fleet-wide
 * limit (`globalConcurrency`, `groupConcurrency`, `rateLimit`): runNow does not exceed them; `busy` — the job could
 * run, but this process already runs `concurrency` jobs (the poll loop's and runNow's together): runNow does not
 * exceed it, and nothing was claimed (also when its claims kept missing a due job that the poll loop kept taking and
 * handing back, having found every slot taken); `paused` — its name is paused fleet-wide (`JobsService.pause`): runNow does not
 * run it either, until `resume`.
 */
export type RunNowConflictReason =
  | 'locked'
  | 'not_due'
  | 'terminal'
  | 'no_handler'
  | 'limit_reached'
  | 'busy'
  | 'paused';

/** Result of `JobsService.runNow`. */
export type RunNowOutcome =
  | { kind: 'not_found' }
  | { kind: 'conflict'; reason: RunNowConflictReason; job: JobRecord }
  /** The job ran here; `job` is the row it ended in. */
  | { kind: 'executed'; job: JobRecord }
  /** Its lease had run out on its last attempt: taken over and dead-lettered, the handler did not run. */
  | { kind: 'dead_lettered'; job: JobRecord }
  /**
   * Claimed, but the handler was never called: the claim's own lease had ended before it could start (a slow
   * database), or the row cannot run as stored (it is then `failed`). `job` is the row afterwards.
   */
  | { kind: 'not_started'; reason: string; job: JobRecord };
