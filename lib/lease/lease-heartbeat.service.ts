import { Injectable } from '@nestjs/common';
import type { ClaimedJob } from '../claim/job-claim.service';
import type { RegisteredJobHandler } from '../discovery/job-handler.registry';
import type { LeaseLostError } from '../errors/lease-lost.error';
import { JobsRepository } from '../persistence/jobs.repository';
import { now } from '../utils/clock';
import { Lease } from './lease';

/**
 * Opens one lease per execution: the single-flight renewal pipeline plus watchdog (see `Lease`),
 * wired to the owner-fenced renewal write of the repository.
 */
@Injectable()
export class LeaseHeartbeat {
  constructor(private readonly repository: JobsRepository) {}

  open(
    claim: ClaimedJob,
    handler: RegisteredJobHandler,
    hooks: { onStale: (error: LeaseLostError) => void; onRenewed?: (lockedUntil: Date) => void },
  ): Lease {
    const { doc, lockId } = claim;
    if (!doc.lockedUntil) throw new Error(`Claimed job ${doc._id.toHexString()} has no lockedUntil`);
    return new Lease({
      jobId: doc._id.toHexString(),
      lockId,
      lockedUntil: doc.lockedUntil,
      claimedAt: doc.startedAt,
      heartbeatIntervalMs: handler.heartbeatIntervalMs,
      leaseMs: handler.leaseMs,
      renew: (requestedUntil) => this.repository.renewLease(doc._id, lockId, requestedUntil, now()),
      relinquish: (until) => this.repository.relinquishLease(doc._id, lockId, until),
      onStale: hooks.onStale,
      onRenewed: hooks.onRenewed,
    });
  }
}
