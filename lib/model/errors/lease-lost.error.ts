import { JobsError } from './jobs.error.js';

/**
 * The execution no longer owns its job: the lease expired before a renewal landed, or another
 * worker took the job over. `ctx.signal` is aborted with this error; stop work and do not write.
 */
export class LeaseLostError extends JobsError {
  constructor(
    readonly jobId: string,
    readonly lockId: string,
    readonly reason: 'expired' | 'taken-over',
  ) {
    super(
      reason === 'expired'
        ? `Lease of job ${jobId} expired before a renewal landed; another worker may now own it`
        : `Job ${jobId} is now owned by another worker (lock ${lockId} no longer matches)`,
    );
  }
}
