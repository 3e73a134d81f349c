import { Inject, Injectable, Logger } from '@nestjs/common';
import type { Types } from 'mongoose';
import { JobEvents } from '../events/job-events';
import { JOBS_LOGGER_CONTEXT, JOBS_RESOLVED_OPTIONS } from '../jobs.constants';
import type { ResolvedJobsOptions } from '../jobs.options';
import type { JobDocument } from '../persistence/job.schema';
import { JobsRepository } from '../persistence/jobs.repository';
import { addMs, now } from '../utils/clock';
import { LockIdSequence } from './lock-id';

/** A row this process now owns (`lockedBy === lockId`, status `running`). */
export interface ClaimedJob {
  doc: JobDocument;
  lockId: string;
}

/** Moves rows into `running` for this worker: expired leases first, then due pending rows. */
@Injectable()
export class JobClaimService {
  private readonly logger = new Logger(JOBS_LOGGER_CONTEXT);
  private readonly lockIds: LockIdSequence;

  constructor(
    private readonly repository: JobsRepository,
    @Inject(JOBS_RESOLVED_OPTIONS) private readonly options: ResolvedJobsOptions,
    private readonly events: JobEvents,
  ) {
    this.lockIds = new LockIdSequence(options.workerId);
  }

  /**
   * Claims the next job, skipping names at their concurrency limit. A reclaimed job whose lost attempt
   * exhausts its attempts is dead-lettered here and never reaches a handler.
   */
  async claimNext(excludedNames: string[] = []): Promise<ClaimedJob | null> {
    for (;;) {
      const at = now();
      const lockId = this.lockIds.next();
      const lockedUntil = addMs(at, this.options.leaseMs);
      const reclaimed = await this.repository.reclaimExpired(at, lockId, lockedUntil, excludedNames);
      if (!reclaimed) {
        const due = await this.repository.claimDue(at, lockId, lockedUntil, excludedNames);
        return due && { doc: due, lockId };
      }
      if (reclaimed.attemptCount < reclaimed.maxAttempts) return { doc: reclaimed, lockId };
      if (await this.repository.deadLetter(reclaimed._id, lockId, at)) {
        const about = { jobId: reclaimed._id.toHexString(), name: reclaimed.name, attempt: reclaimed.attemptCount };
        this.events.emit('dead', about, reclaimed.lastError ?? 'Lease expired');
      }
      this.logger.warn(
        `Job ${reclaimed._id.toHexString()} (${reclaimed.name}) dead-lettered: its lease expired on the last of ${reclaimed.maxAttempts} attempts`,
      );
    }
  }

  /** Claims exactly this job when it is pending and due (`runNow`). */
  async claimById(id: Types.ObjectId): Promise<ClaimedJob | null> {
    const at = now();
    const lockId = this.lockIds.next();
    const doc = await this.repository.claimById(id, at, lockId, addMs(at, this.options.leaseMs));
    return doc && { doc, lockId };
  }
}
