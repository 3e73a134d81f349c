import type { JobExecutionContext } from '../model/job-execution-context.js';
import type { BackoffOptions, RetentionPeriods } from '../model/jobs.options.js';
import type { CronSchedule } from './cron-schedule.js';
import type { FleetLimits } from './fleet-limits.js';

export type BoundJobHandler = (payload: unknown, ctx: JobExecutionContext) => unknown;

/** A handler with its options resolved against the module's. */
export interface RegisteredJobHandler {
  name: string;
  handler: BoundJobHandler;
  /** `Class.method`, for messages. */
  site: string;
  concurrency: number;
  maxAttempts: number;
  backoff: BackoffOptions;
  /** At least the module's `leaseMs`; the heartbeat derives its renewal interval from it (`LeaseHeartbeat.open`). */
  leaseMs: number;
  timeoutMs: number | undefined;
  /** Schedule, when `cron` was given: parsed, and known to match some date. */
  schedule: CronSchedule | undefined;
  /** This name's own retention, merged over the module's; undefined: the module's. */
  retention: RetentionPeriods | undefined;
  /** Fleet-wide limits (`globalConcurrency`, `rateLimit`, `groupConcurrency`); empty when none applies. */
  limits: FleetLimits;
}
