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
  /** When a search for expired leases last came back empty (epoch ms). */
  private lastReclaimSearchAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly repository: JobsRepository,
    @Inject(JOBS_RESOLVED_OPTIONS) private readonly options: ResolvedJobsOptions,
    private readonly events: JobEvents,
  ) {
    this.lockIds = new LockIdSequence(options.workerId);
  }

  /**
   * Claims the next job, skipping names at their concurrency limit. Expired leases come first: a reclaimed job
   * whose lost attempt exhausts its attempts is dead-lettered here and never reaches a handler.
   *
   * Expired leases are looked for at most once per `pollIntervalMs` while pending work keeps this worker busy,
   * and after every poll that found nothing due. A lease only expires `leaseMs` after its last renewal, so this
   * delays a reclaim by at most one poll interval, and saves a query per job under load (3 → 2 round trips).
   */
  async claimNext(excludedNames: string[] = []): Promise<ClaimedJob | null> {
    const at = now();
    const reclaimDue = at.getTime() - this.lastReclaimSearchAt >= this.options.pollIntervalMs;
    if (reclaimDue) {
      const reclaimed = await this.reclaimNext(excludedNames);
      if (reclaimed) return reclaimed;
    }
    const lockId = this.lockIds.next();
    // A fresh clock after the reclaim search's round trip: the lease must start when the claim is sent.
    const claimAt = reclaimDue ? now() : at;
    const due = await this.repository.claimDue(claimAt, lockId, addMs(claimAt, this.options.leaseMs), excludedNames);
    if (due) return { doc: due, lockId };
    return reclaimDue ? null : this.reclaimNext(excludedNames);
  }

  /** Takes over the oldest expired lease, dead-lettering those whose lost attempt was their last. */
  private async reclaimNext(excludedNames: string[]): Promise<ClaimedJob | null> {
    for (;;) {
      const at = now();
      const lockId = this.lockIds.next();
      const reclaimed = await this.repository.reclaimExpired(
        at,
        lockId,
        addMs(at, this.options.leaseMs),
        excludedNames,
      );
      if (!reclaimed) {
        // Only a search that found nothing resets the clock: while expired rows remain, keep draining them.
        this.lastReclaimSearchAt = at.getTime();
        return null;
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
