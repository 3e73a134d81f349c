import type { FinishedStatus } from './job-record.js';

/** Exponential backoff between attempts: `min(baseMs · 2^(n−1), maxMs)` scaled by a random factor in [0.5, 1). */
export interface BackoffOptions {
  /** Delay before the 2nd attempt (before jitter). @default 1000 */
  baseMs: number;
  /** Upper bound of any delay (before jitter). @default 900000 (15 minutes) */
  maxMs: number;
}

/**
 * How long finished jobs are kept, in ms per final status, before the sweeper of a worker process deletes them. The
 * write that finishes a job stamps its `expiresAt` from these, so each job name's retention applies whoever sweeps.
 */
export interface RetentionOptions {
  /** @default 604800000 (7 days) */
  completed?: number;
  /** @default 2592000000 (30 days) */
  dead?: number;
  /** @default 2592000000 (30 days) */
  failed?: number;
  /** @default 2592000000 (30 days) */
  cancelled?: number;
  /** How often each worker process deletes expired jobs. @default 60000 */
  sweepIntervalMs?: number;
}

/** A `@JobHandler`'s own retention: per status, the module's where unset. */
export type HandlerRetentionOptions = Omit<RetentionOptions, 'sweepIntervalMs'>;

/** Retention per final status in ms; null keeps such jobs for good (no `expiresAt` is stamped). */
export type RetentionPeriods = Record<FinishedStatus, number | null>;

/** OpenTelemetry settings of `JobsModule.forRoot({ telemetry })`. */
export interface TelemetryOptions {
  /**
   * How often, at most, this process reads the pending/running counts per job name that its observable gauges
   * report (one aggregate over the collection per read; exports in between report the last read).
   * @default 15000
   */
  metricsIntervalMs?: number;
  /**
   * Job names that metrics report under their own `messaging.destination.name`, besides the names this process has
   * handlers for (e.g. what an enqueue-only app sends). Every other name is reported as `_other`, so job names made
   * at run time (`tenant.${id}.sync`) cannot grow the number of series without bound. At most 1,000 names; spans
   * always carry the real name.
   * @default []
   */
  extraJobNames?: readonly string[];
}

/** Options of `JobsModule.forRoot()` / the factory of `forRootAsync()`. */
export interface JobsModuleOptions {
  /** Name of the jobs collection. @default 'jobs' */
  collectionName?: string;
  /** Run a worker (poll loop) in this process; `false` makes an enqueue-only process. @default true */
  worker?: boolean;
  /**
   * Jobs this process runs at once, across all handlers, those `runNow` starts included (beyond it, runNow answers
   * `conflict` with reason `busy`). @default 4
   */
  concurrency?: number;
  /**
   * Wait between polls that found nothing to do, in ms: cut short by a job enqueued in this process, and ended when the
   * next pending job falls due if that is sooner. @default 1000
   */
  pollIntervalMs?: number;
  /**
   * Most due jobs one claim takes while there is a backlog and at least two slots are free: one command reads them in
   * claim order, one takes each for its own lock id, one reads back what it took (a fourth searches for expired leases
   * first, at most once per poll interval); see docs/guarantees.md, "Batch claims". A claim never asks for more than
   * the free slots. `1` claims one job per `findOneAndUpdate` (up to 8 in flight), as a lone job on a quiet queue
   * always is. Nothing else is sent while a batch is in flight, so a size well below `concurrency` fills free slots a
   * few at a time: use 1, or at least `concurrency`. From 1 to 1,000.
   * @default 32
   */
  claimBatchSize?: number;
  /**
   * The poll interval while the worker's change stream is live (replica sets and sharded clusters): events wake the
   * loop, so polls are only a safety net; a missed event, or an expired lease of a crashed worker, waits at most this
   * long. At least `pollIntervalMs`. Without change streams (a standalone server) `pollIntervalMs` applies.
   * @default the larger of 30000 and pollIntervalMs
   */
  changeStreamPollIntervalMs?: number;
  /**
   * Open a change stream on the jobs collection, where the server has them, so that jobs of other processes wake this
   * worker at once (replica sets and sharded clusters; elsewhere it logs once and polls). `false`: poll only, every
   * `pollIntervalMs`, e.g. for many workers on a busy replica set (each stream reads the whole oplog). @default true
   */
  changeStream?: boolean;
  /** Lease length in ms: how long a claimed job stays locked without a renewal. @default 30000 */
  leaseMs?: number;
  /** Automatic renewal period in ms; must be below `leaseMs`. @default leaseMs / 3 */
  heartbeatIntervalMs?: number;
  /**
   * How long shutdown waits for running handlers before aborting them, in ms, counted from the module's first shutdown
   * hook. Every shutdown step gives up `shutdownGraceMs` + 3 s after that hook, whatever the database does
   * (docs/operations.md, Graceful shutdown). @default 10000
   */
  shutdownGraceMs?: number;
  /** Attempts before a job is dead-lettered (a lost lease counts as one). @default 5 */
  maxAttempts?: number;
  /** Retry backoff. @default { baseMs: 1000, maxMs: 900000 } */
  backoff?: Partial<BackoffOptions>;
  /** Identity of this worker process in `lockedBy`. @default `${hostname}:${pid}:${random}` */
  workerId?: string;
  /**
   * Job names this process's poll loop claims, e.g. a separate pool for heavy jobs. Every entry needs a
   * `@JobHandler` in this process (bootstrap fails otherwise). `runNow` is not limited by it.
   * @default every name with a `@JobHandler` in this process
   */
  runOnly?: string[];
  /**
   * Bootstrap fails with `IndexSetupTimeoutError` when creating and checking the collection's indexes takes longer,
   * instead of hanging on a database that does not answer. Raise it when a large collection needs longer builds.
   * @default 60000
   */
  indexSetupTimeoutMs?: number;
  /**
   * How long finished jobs are kept before worker processes delete them; `false` keeps every job for good (a
   * handler's own `retention` still applies to its jobs). A cron tick's job is kept at least a day past its tick
   * whatever this says (see docs/operations.md, "Retention and purge").
   * @default { completed: 7 days, dead, failed and cancelled: 30 days, sweepIntervalMs: 60000 }
   */
  retention?: RetentionOptions | false;
  /**
   * OpenTelemetry traces and metrics (see docs/observability.md). On whenever the optional
   * peer `@opentelemetry/api` is installed: spans and metrics then go to the tracer/meter providers the app registers
   * (none registered: the API's no-op ones). `false` turns it off; without the package it is off whatever this says.
   * @default { metricsIntervalMs: 15000 }
   */
  telemetry?: TelemetryOptions | false;
}

/** Options that must be known when the module is defined (also accepted by `forRootAsync`). */
export interface JobsModuleExtras {
  /** Name of the `@nestjs/mongoose` connection to use. @default the default connection */
  connectionName?: string;
}

/** Module options after defaults are merged and validated. */
export interface ResolvedJobsOptions {
  collectionName: string;
  worker: boolean;
  concurrency: number;
  pollIntervalMs: number;
  claimBatchSize: number;
  changeStreamPollIntervalMs: number;
  changeStream: boolean;
  leaseMs: number;
  heartbeatIntervalMs: number;
  shutdownGraceMs: number;
  maxAttempts: number;
  backoff: BackoffOptions;
  workerId: string;
  /** Names the poll loop may claim; undefined: every name with a handler in this process. */
  runOnly: string[] | undefined;
  indexSetupTimeoutMs: number;
  retention: { periods: RetentionPeriods; sweepIntervalMs: number };
  /** `false`: no telemetry, the API is not even loaded. */
  telemetry: Required<TelemetryOptions> | false;
}
