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
   * At most one job per key and window of `windowMs`, whatever became of it: the first enqueue of a window stores the
   * job, every later one of that window returns it (`deduplicated: true`), even once it finished. Windows are fixed,
   * counted from the Unix epoch (`floor(runAt / windowMs)`), and enforced by a unique index, so they hold across
   * processes. Cannot be combined with `dedupeKey` or `debounce`. See docs/enqueueing.md, "Throttle and debounce".
   */
  throttle?: EnqueueWindow;
  /**
   * One pending job per key, run once the key has been quiet for `windowMs`: the first enqueue stores the job due in
   * `windowMs`; each later one while it is still pending replaces its payload (nothing else) and moves its `runAt` to
   * `windowMs` from now, but never past `maxWaitMs` after the first. A job that started frees the key: the next enqueue
   * stores a new one. Cannot be combined with `runAt`, `delayMs`, `dedupeKey` or `throttle`.
   */
  debounce?: DebounceWindow;
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
   * docs/enqueueing.md, "Enqueue inside a transaction".
   */
  session?: ClientSession;
}

/** A key and a window, a whole number of ms from 1 to 1e12 (~31 years): `EnqueueOptions.throttle`. */
export interface EnqueueWindow {
  /** A non-empty string of at most 200 characters, scoped by job name (as `dedupeKey`). */
  key: string;
  windowMs: number;
}

/** `EnqueueOptions.debounce`: a window, and optionally the longest a job may wait from its first enqueue. */
export interface DebounceWindow extends EnqueueWindow {
  /**
   * The job runs at most this long (whole ms) after the enqueue that stored it, however often it is replaced; a
   * replacement's own `maxWaitMs` bounds the `runAt` it sets too.
   */
  maxWaitMs?: number;
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
   * True when nothing new was stored, and no `enqueued` event was emitted: a pending or running job of the same name
   * holds the `dedupeKey`, or a job of the same name took the `throttle` key's window (the record is that job's, with
   * its payload and options, not yours), or a pending job holds the `debounce` key (the record is that job after your
   * payload replaced its own and its `runAt` moved).
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
