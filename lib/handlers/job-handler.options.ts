import type { BackoffOptions, HandlerRetentionOptions } from '../model/jobs.options.js';

/** Per-handler options of `@JobHandler(name, options)`; unset ones fall back to the module's. */
export interface JobHandlerOptions {
  /** Most executions of this job at once in one process (within the module's `concurrency`). @default unlimited */
  concurrency?: number;
  /** Attempts before dead-lettering, for jobs enqueued without their own `maxAttempts`. @default module `maxAttempts` */
  maxAttempts?: number;
  /** Retry backoff. @default module `backoff` */
  backoff?: Partial<BackoffOptions>;
  /** Lease length while this handler runs; heartbeats renew every `leaseMs / 3`. @default module `leaseMs` */
  leaseMs?: number;
  /** Abort the handler's signal and fail the attempt after this long. @default no timeout */
  timeoutMs?: number;
  /**
   * Run on a schedule (cron syntax, 5 fields or 6 with seconds). Every instance schedules it, and at most one job
   * per tick is enqueued however many instances run; its payload is `{ scheduledFor: '<tick ISO>' }`. Across clock
   * changes, as in Vixie cron, a schedule whose minute or hour field starts with `*` runs in real time and any other
   * fires once per wall-clock time (a skipped time at the jump); after a stall only the latest due tick is enqueued,
   * so a tick no instance fired has no job (see docs/scheduling.md).
   */
  cron?: string;
  /** IANA time zone the cron expression is read in. @default UTC */
  timeZone?: string;
  /**
   * How long this name's finished jobs are kept (ms per final status, the module's where unset); `false` keeps them
   * for good. Applies to the jobs this process finishes (or cancels). @default module `retention`
   */
  retention?: HandlerRetentionOptions | false;
  /**
   * Most executions of this name running at once across every process on the collection (at most 1000). Enforced by
   * MongoDB: a slot is held until its holder's lease ends, so a crashed or partitioned worker's slot comes back when
   * its lease runs out, and a handler that ignores its abort keeps its slot until then. Every process that runs the
   * name must declare the same limit. @default unlimited
   */
  globalConcurrency?: number;
  /**
   * At most `max` executions of this name started in any window of `perMs` ms across every process (reclaims count
   * as starts). `max` at most 10000. @default unlimited
   */
  rateLimit?: { max: number; perMs: number };
  /**
   * Most executions running at once per `group` (the `group` enqueue option, e.g. a tenant id), all groups in
   * parallel; a group's jobs start in claim order (priority, runAt, id). Jobs enqueued without a group are not
   * limited by it. At most 1000. @default unlimited
   */
  groupConcurrency?: number;
}

/** What the decorator stores. */
export interface JobHandlerMetadata {
  name: string;
  options: JobHandlerOptions;
}
