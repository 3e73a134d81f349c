import { Inject, Injectable } from '@nestjs/common';
import type { FinishedStatus } from '../model/job-record.js';
import { JOBS_RESOLVED_OPTIONS } from '../model/jobs.constants.js';
import type { ResolvedJobsOptions, RetentionPeriods } from '../model/jobs.options.js';
import { type ExpiringRow, expiryOf } from './job-expiry.js';
import { JobHandlerRegistry } from './job-handler.registry.js';

/** Which retention a job gets: its handler's when this process has one for its name, else the module's. */
@Injectable()
export class JobRetention {
  constructor(
    private readonly registry: JobHandlerRegistry,
    @Inject(JOBS_RESOLVED_OPTIONS) private readonly options: ResolvedJobsOptions,
  ) {}

  /** The `expiresAt` to stamp on a row of `name` finishing as `status` at `finishedAt`; undefined: keep it. */
  expiresAt(status: FinishedStatus, row: { name: unknown } & Partial<ExpiringRow>, finishedAt: Date): Date | undefined {
    return expiryOf(this.periodsFor(row.name)[status], finishedAt, row);
  }

  /** True when some job finished here could be stamped, so this process has something to sweep for. */
  stampsAny(): boolean {
    const all = [this.options.retention.periods, ...this.registry.all().map((handler) => handler.retention)];
    return all.some((periods) => periods && Object.values(periods).some((ms) => ms !== null));
  }

  private periodsFor(name: unknown): RetentionPeriods {
    const handler = typeof name === 'string' ? this.registry.get(name) : undefined;
    return handler?.retention ?? this.options.retention.periods;
  }
}
