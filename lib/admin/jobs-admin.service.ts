import { Inject, Injectable } from '@nestjs/common';
import { WorkArrived } from '../enqueue/work-arrived.js';
import { JobHandlerRegistry } from '../handlers/job-handler.registry.js';
import { JobRetention } from '../handlers/job-retention.service.js';
import { now } from '../model/clock.js';
import { DedupeConflictError } from '../model/errors/dedupe-conflict.error.js';
import { JobCancelledError } from '../model/errors/job-cancelled.error.js';
import { JobEvents } from '../model/events/job-events.js';
import type { JobRecord } from '../model/job-record.js';
import { JOBS_RESOLVED_OPTIONS } from '../model/jobs.constants.js';
import type { ResolvedJobsOptions } from '../model/jobs.options.js';
import { requireJobId } from '../model/require-job-id.js';
import { toJobRecord } from '../persistence/job.schema.js';
import { JobAdminStore } from '../persistence/job-admin.store.js';
import { JobReadStore } from '../persistence/job-read.store.js';
import { JobRunner } from '../worker/job-runner.service.js';
import { type PurgeOptions, purgeLimit, resolvePurgeFilter } from './purge-options.js';
import { SWEEP_BATCH_SIZE } from './retention-sweeper.service.js';

/**
 * What an operator does to stored jobs: cancel, retry, promote and purge (`JobsService.cancel`, `retry`, `promote`
 * and `purge`, where their contracts are documented; the dashboard goes through those).
 */
@Injectable()
export class JobsAdmin {
  constructor(
    private readonly admin: JobAdminStore,
    private readonly reads: JobReadStore,
    private readonly retention: JobRetention,
    private readonly registry: JobHandlerRegistry,
    private readonly runner: JobRunner,
    private readonly events: JobEvents,
    private readonly workArrived: WorkArrived,
    @Inject(JOBS_RESOLVED_OPTIONS) private readonly options: ResolvedJobsOptions,
  ) {}

  /** @throws InvalidJobIdError */
  async cancel(id: string): Promise<JobRecord | null> {
    const jobId = requireJobId(id);
    // Its name picks the retention to stamp; a name never changes, so reading it first races with nothing.
    const subject = await this.admin.findCancelSubject(jobId);
    if (!subject) return null;
    const at = now();
    const cancelled = await this.admin.cancel(jobId, at, {
      expiresAt: this.retention.expiresAt('cancelled', subject, at),
      // Only for a row claimed by an older version, which records no lease: the one this process knows for the name.
      fallbackLeaseMs: this.registry.get(subject.name)?.leaseMs ?? this.options.leaseMs,
    });
    if (!cancelled) return this.findById(id);
    const hex = jobId.toHexString();
    this.runner.cancelLocal(hex, new JobCancelledError(hex));
    this.events.emit('cancelled', { jobId: hex, name: cancelled.name, attempt: cancelled.attemptCount });
    return toJobRecord(cancelled);
  }

  /** @throws InvalidJobIdError, DedupeConflictError, RetryContendedError */
  async retry(id: string): Promise<JobRecord | null> {
    const result = await this.admin.retry(requireJobId(id), now());
    switch (result.kind) {
      case 'not-revivable':
        return this.findById(id);
      case 'conflict': {
        const { job, holder } = result;
        throw new DedupeConflictError(id, job.name, job.dedupeKey as string, holder._id.toHexString());
      }
      case 'revived':
        this.workArrived.signal(result.job.runAt);
        return toJobRecord(result.job);
    }
  }

  /** @throws InvalidJobIdError */
  async promote(id: string): Promise<JobRecord | null> {
    const result = await this.admin.promote(requireJobId(id), now());
    if (result?.promoted) this.workArrived.signal();
    return result && toJobRecord(result.row);
  }

  /** Deletes in batches of at most `SWEEP_BATCH_SIZE` until `limit` or a short batch. @throws InvalidOptionError */
  async purge(options: PurgeOptions): Promise<number> {
    const filter = resolvePurgeFilter(options);
    const limit = purgeLimit(options);
    let deleted = 0;
    while (deleted < limit) {
      const size = Math.min(SWEEP_BATCH_SIZE, limit - deleted);
      const batch = await this.admin.deleteFinished(filter, now(), size);
      deleted += batch.deleted;
      if (batch.found < size) break;
    }
    return deleted;
  }

  private async findById(id: string): Promise<JobRecord | null> {
    const doc = await this.reads.findById(requireJobId(id));
    return doc && toJobRecord(doc);
  }
}
