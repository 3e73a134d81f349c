import { Injectable } from '@nestjs/common';
import { DuplicateJobHandlerError } from '../errors/duplicate-job-handler.error';
import type { JobExecutionContext } from '../execution/job-execution-context';
import type { BackoffOptions } from '../jobs.options';
import type { CronSchedule } from '../schedule/cron-schedule';

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
  leaseMs: number;
  heartbeatIntervalMs: number;
  timeoutMs: number | undefined;
  /** Schedule, when `cron` was given: parsed, and known to match some date. */
  schedule: CronSchedule | undefined;
}

/** name → handler. Filled by the explorer at bootstrap, read by the runner and JobsService. */
@Injectable()
export class JobHandlerRegistry {
  private readonly handlers = new Map<string, RegisteredJobHandler>();

  register(entry: RegisteredJobHandler): void {
    const existing = this.handlers.get(entry.name);
    if (existing) throw new DuplicateJobHandlerError(entry.name, existing.site, entry.site);
    this.handlers.set(entry.name, entry);
  }

  get(name: string): RegisteredJobHandler | undefined {
    return this.handlers.get(name);
  }

  all(): RegisteredJobHandler[] {
    return [...this.handlers.values()];
  }

  names(): string[] {
    return [...this.handlers.keys()];
  }

  get size(): number {
    return this.handlers.size;
  }
}
