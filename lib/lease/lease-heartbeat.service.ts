import { Inject, Injectable, Logger } from '@nestjs/common';
import type { Types } from 'mongoose';
import { now } from '../model/clock.js';
import { errorInfo } from '../model/error-info.js';
import type { JobCancelledError } from '../model/errors/job-cancelled.error.js';
import type { LeaseLostError } from '../model/errors/lease-lost.error.js';
import type { LogBatch } from '../model/job-log.js';
import type { JobProgress } from '../model/job-record.js';
import { JOBS_LOGGER_CONTEXT, JOBS_RESOLVED_OPTIONS } from '../model/jobs.constants.js';
import type { ResolvedJobsOptions } from '../model/jobs.options.js';
import { JobLeaseStore } from '../persistence/job-lease.store.js';
import { HeartbeatClock } from './heartbeat-clock.js';
import { Lease } from './lease.js';
import { RenewalBatcher } from './renewal-batcher.js';

/** The claimed row a lease is opened on, and the lease its handler asked for. */
export interface LeaseTerms {
  jobId: Types.ObjectId;
  /** The same id as hex, as the runner already has it (messages; not converted again per job). */
  jobHex: string;
  lockId: string;
  /** The deadline the claim wrote. */
  lockedUntil: Date;
  /** When the claim wrote it (`startedAt`), if known. */
  claimedAt: Date | undefined;
  /** The handler's lease: at least the module's `leaseMs`. */
  leaseMs: number;
}

/**
 * Opens one lease per execution: the single-flight renewal pipeline plus watchdog (see `Lease`), on the process's
 * heartbeat clock, renewing through the batcher (owner-fenced writes, one round trip per event-loop turn).
 */
@Injectable()
export class LeaseHeartbeat {
  private readonly logger = new Logger(JOBS_LOGGER_CONTEXT);
  /** One clock for every lease of this process, so leases due together beat (and renew) together. */
  private readonly clock = new HeartbeatClock(undefined, (error) =>
    this.logger.error(`A lease heartbeat failed: ${errorInfo(error).message}`),
  );

  /** Renewals requested in one event-loop turn (leases that beat together) share one round trip. */
  private readonly batcher: RenewalBatcher;

  constructor(
    private readonly leases: JobLeaseStore,
    @Inject(JOBS_RESOLVED_OPTIONS) private readonly options: ResolvedJobsOptions,
  ) {
    this.batcher = new RenewalBatcher(leases, now);
  }

  open(
    terms: LeaseTerms,
    hooks: {
      onStale: (error: LeaseLostError) => void;
      onCancelled?: (error: JobCancelledError) => void;
      onRenewed?: (lockedUntil: Date) => void;
      onProgress?: (progress: JobProgress) => void;
    },
  ): Lease {
    const { jobId, lockId } = terms;
    return new Lease({
      jobId: terms.jobHex,
      lockId,
      lockedUntil: terms.lockedUntil,
      claimedAt: terms.claimedAt,
      heartbeatIntervalMs: heartbeatIntervalFor(terms.leaseMs, this.options),
      leaseMs: terms.leaseMs,
      renew: (requestedUntil, progress, logs) =>
        this.renew(jobId, lockId, requestedUntil, terms.leaseMs, progress, logs),
      relinquish: (until) => this.leases.relinquishLease(jobId, lockId, until),
      onStale: hooks.onStale,
      onCancelled: hooks.onCancelled,
      onRenewed: hooks.onRenewed,
      onProgress: hooks.onProgress,
      heartbeatClock: this.clock,
    });
  }

  /**
   * One renewal through the batcher. A renewal that matched no row reads the row once to say why: this lock's own
   * finishing write ended the run (its answer not back yet, or lost) → `'finished'`, the execution is not stale; the
   * job was cancelled → `'cancelled'`, the owner reports a cancel, not a lost lease; anything else → `null` (lost).
   * A failed read rejects like a failed renewal, so the lease retries while it is live instead of guessing.
   */
  private async renew(
    jobId: Types.ObjectId,
    lockId: string,
    requestedUntil: Date,
    leaseMs: number,
    progress: JobProgress | undefined,
    logs: LogBatch | undefined,
  ): Promise<Date | null | 'cancelled' | 'finished'> {
    const renewed = await this.batcher.renew(jobId, lockId, requestedUntil, progress, leaseMs, logs);
    if (renewed !== null) return renewed;
    const [row] = await this.leases.readLeaseOwners([jobId]);
    if (row?.finishedBy === lockId) return 'finished';
    return row?.status === 'cancelled' ? 'cancelled' : null;
  }
}

/**
 * A handler lease longer than the module's is renewed at a third of it, keeping two missed renewals of slack like
 * the module's default; the module's own interval (which may be configured) serves every other handler.
 */
export function heartbeatIntervalFor(
  leaseMs: number,
  module: Pick<ResolvedJobsOptions, 'leaseMs' | 'heartbeatIntervalMs'>,
): number {
  return leaseMs > module.leaseMs ? leaseMs / 3 : module.heartbeatIntervalMs;
}
